"""LeNet-5 (LeCun et al., Proc. IEEE 1998, Fig. 2) in its common modern form.

Assumptions (the 1998 network differs in details that do not change the layer shapes much):
a 1-channel 32x32 input; C1 = 6 5x5 convolutions; S2 = 2x2 max pool; C3 = 16 5x5 convolutions
with full connectivity to all 6 maps (the paper's sparse C3 table is not modelled); S4 = 2x2 max
pool; F5/F6/output = 400-120-84-classes fully connected; ReLU activations instead of scaled tanh.
From these shapes: 61,706 parameters and 416,520 multiply-adds (833,040 FLOPs) per sample.
"""

from __future__ import annotations

from torch import nn

from estimator.workloads.zoo.common import ZooModel, classification_inputs, cross_entropy, positive_int


class LeNet5(nn.Module):
    def __init__(self, num_classes: int, input_size: int = 32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )  # fmt: skip
        side = ((input_size - 4) // 2 - 4) // 2
        self.classifier = nn.Sequential(
            nn.Linear(16 * side * side, 120), nn.ReLU(inplace=True),
            nn.Linear(120, 84), nn.ReLU(inplace=True),
            nn.Linear(84, num_classes),
        )  # fmt: skip

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def build_lenet5(cfg, where: str = "model") -> ZooModel:
    from estimator.errors import EstimatorError

    classes = positive_int(cfg, "num_classes", where)
    size = positive_int(cfg, "input_size", where)
    if size < 16:
        raise EstimatorError(f"{where}.input_size must be at least 16 for LeNet-5, got {size}")
    module = LeNet5(classes, size)
    return ZooModel(cfg["name"], module, classification_inputs(1, size, classes), cross_entropy, module)
