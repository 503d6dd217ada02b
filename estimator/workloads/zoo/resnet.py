"""ResNet-50 (He et al., CVPR 2016), in torchvision's layout ("ResNet v1.5").

Assumes torchvision's choices so the parameter count is exactly 25,557,032: bottleneck blocks
[3, 4, 6, 3] with expansion 4, the stride-2 downsampling on the 3x3 convolution, BatchNorm after
every convolution, a 1x1 convolution + BatchNorm projection shortcut where the shape changes,
global average pooling and one fully connected classifier.
"""

from __future__ import annotations

from torch import nn

from estimator.workloads.zoo.common import ZooModel, classification_inputs, cross_entropy, positive_int


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout)]


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            *_conv_bn(cin, width, 1),
            nn.ReLU(inplace=True),
            *_conv_bn(width, width, 3, stride),
            nn.ReLU(inplace=True),
            *_conv_bn(width, cout, 1),
        )
        self.shortcut = (
            nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity()
        )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, blocks: tuple[int, ...], num_classes: int):
        super().__init__()
        layers: list[nn.Module] = [*_conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for stage, count in enumerate(blocks):
            width = 64 * 2**stage
            for i in range(count):
                layers.append(Bottleneck(cin, width, 2 if (i == 0 and stage > 0) else 1))
                cin = width * Bottleneck.expansion
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        return self.fc(self.pool(self.features(x)).flatten(1))


def build_resnet50(cfg, where: str = "model") -> ZooModel:
    classes = positive_int(cfg, "num_classes", where)
    size = positive_int(cfg, "input_size", where)
    module = ResNet((3, 4, 6, 3), classes)
    return ZooModel(cfg["name"], module, classification_inputs(3, size, classes), cross_entropy, module)
