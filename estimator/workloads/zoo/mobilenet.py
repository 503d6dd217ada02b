"""MobileNetV2 (Sandler et al., CVPR 2018, Table 2), torchvision layout, width multiplier 1.0.

Assumes torchvision's choices so the parameter count is exactly 3,504,872: inverted residual
blocks (1x1 expand, 3x3 depthwise, 1x1 linear projection; BatchNorm after each convolution, ReLU6
after the first two), a residual connection when stride is 1 and channels are unchanged, a final
1x1 convolution to 1280 channels, global average pooling, dropout 0.2 and a linear classifier.
"""

from __future__ import annotations

from torch import nn

from estimator.workloads.zoo.common import ZooModel, classification_inputs, cross_entropy, positive_int

# (expansion t, output channels c, repeats n, first stride s) -- paper Table 2
SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _conv_bn_relu6(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU6(inplace=True),
    )


class InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        hidden = cin * expand
        layers: list[nn.Module] = [_conv_bn_relu6(cin, hidden, 1)] if expand != 1 else []
        layers += [
            _conv_bn_relu6(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn_relu6(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in SETTINGS:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn_relu6(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, num_classes))

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


def build_mobilenet_v2(cfg, where: str = "model") -> ZooModel:
    classes = positive_int(cfg, "num_classes", where)
    size = positive_int(cfg, "input_size", where)
    module = MobileNetV2(classes)
    return ZooModel(cfg["name"], module, classification_inputs(3, size, classes), cross_entropy, module)
