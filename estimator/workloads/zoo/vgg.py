"""VGG-13 and VGG-16 (Simonyan & Zisserman, ICLR 2015, configurations B and D), torchvision layout.

Assumes torchvision's choices so the parameter counts are exactly 133,047,848 / 138,357,544:
3x3 convolutions with bias and ReLU (no BatchNorm), 2x2 max pooling after each stage, an adaptive
average pool to 7x7, and the 25088-4096-4096-classes classifier with ReLU and dropout (p=0.5).
"""

from __future__ import annotations

from torch import nn

from estimator.workloads.zoo.common import ZooModel, classification_inputs, cross_entropy, positive_int

# channels per convolution, "M" = 2x2 max pool (paper Table 1, columns B and D)
LAYOUTS = {
    "vgg13": (64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
    "vgg16": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"),
}


class VGG(nn.Module):
    def __init__(self, layout: tuple, num_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in layout:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, item, 3, padding=1), nn.ReLU(inplace=True)]
                cin = item
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(cin * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.pool(self.features(x)).flatten(1))


def build_vgg(cfg, where: str = "model", arch: str = "vgg16") -> ZooModel:
    classes = positive_int(cfg, "num_classes", where)
    size = positive_int(cfg, "input_size", where)
    module = VGG(LAYOUTS[arch], classes)
    return ZooModel(cfg["name"], module, classification_inputs(3, size, classes), cross_entropy, module)
