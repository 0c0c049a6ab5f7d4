"""The torchvision classification models the simulator is measured on, written in plain torch.

torchvision's own wheel needs a CUDA build of torch here, so each architecture is written out layer
by layer as torchvision defines it (same layers, channel counts, strides, paddings, activations,
squeeze-and-excitation, shuffles and concatenations; random weights). `build(name)` gives the
torch module (torchvision's when it imports, else ours), `export_onnx(name, batch)` the ONNX model
PyTorch's exporter writes for it (opset 11; 14 for ViT-B/16, whose attention needs it).

    python benchmarks/model_zoo.py mobilenet_v2      # parameters, ONNX ops of the export

The tests (tests/popart/test_cnn_zoo.py) and benchmarks/bench_models.py use it.
"""
from __future__ import annotations

import io
import math
from functools import partial

import torch
from torch import nn
import torch.nn.functional as F

__all__ = ["MODELS", "OPSET", "build", "export_onnx", "input_shape", "randomize_batch_norm"]


def _make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """torchvision's channel rounding: to a multiple of `divisor`, never below 90% of v."""
    min_value = divisor if min_value is None else min_value
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvNormAct(nn.Sequential):
    """Conv2d (no bias) + BatchNorm2d + activation: torchvision's Conv2dNormActivation."""

    def __init__(self, cin, cout, k=3, stride=1, groups=1, act=nn.ReLU, norm=nn.BatchNorm2d, dilation=1):
        pad = (k - 1) // 2 * dilation
        layers = [nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, groups=groups, bias=False), norm(cout)]
        if act is not None:
            layers.append(act(inplace=True) if act in (nn.ReLU, nn.ReLU6, nn.Hardswish, nn.SiLU) else act())
        super().__init__(*layers)


class SqueezeExcitation(nn.Module):
    """Global average pool, a 1x1 conv down and one up, a gate, and the channel-wise product."""

    def __init__(self, channels, squeeze, act=nn.ReLU, gate=nn.Sigmoid):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.act = act()
        self.gate = gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


# ------------------------------------------------------------------------------------------------
# ResNet-18 / 50


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + idt)


class Bottleneck(nn.Module):
    """ResNet v1.5: the stride is on the 3x3 convolution."""
    expansion = 4

    def __init__(self, cin, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        return self.relu(self.bn3(self.conv3(out)) + idt)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._layer(block, 64, layers[0])
        self.layer2 = self._layer(block, 128, layers[1], 2)
        self.layer3 = self._layer(block, 256, layers[2], 2)
        self.layer4 = self._layer(block, 512, layers[3], 2)
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _layer(self, block, planes, blocks, stride=1):
        down = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False),
                                 nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, down)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ------------------------------------------------------------------------------------------------
# MobileNetV2


class InvertedResidualV2(nn.Module):
    def __init__(self, cin, cout, stride, expand_ratio):
        super().__init__()
        hidden = int(round(cin * expand_ratio))
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand_ratio != 1:
            layers.append(ConvNormAct(cin, hidden, 1, act=nn.ReLU6))
        layers += [ConvNormAct(hidden, hidden, 3, stride, groups=hidden, act=nn.ReLU6),
                   nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1)]  # expansion t, channels c, repeats n, first stride s

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        cin, last = 32, 1280
        features = [ConvNormAct(3, cin, 3, 2, act=nn.ReLU6)]
        for t, c, n, s in self.SETTINGS:
            cout = _make_divisible(c, 8)
            for i in range(n):
                features.append(InvertedResidualV2(cin, cout, s if i == 0 else 1, t))
                cin = cout
        features.append(ConvNormAct(cin, last, 1, act=nn.ReLU6))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(last, num_classes))
        _torchvision_init(self)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


def _torchvision_init(model):
    """The initialisation torchvision gives the MobileNets and EfficientNets."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear):
            r = 1.0 / math.sqrt(m.out_features)
            nn.init.uniform_(m.weight, -r, r)
            nn.init.zeros_(m.bias)


# ------------------------------------------------------------------------------------------------
# MobileNetV3-small


class InvertedResidualV3(nn.Module):
    def __init__(self, cin, k, expanded, cout, use_se, act, stride):
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expanded != cin:
            layers.append(ConvNormAct(cin, expanded, 1, act=act))
        layers.append(ConvNormAct(expanded, expanded, k, stride, groups=expanded, act=act))
        if use_se:
            layers.append(SqueezeExcitation(expanded, _make_divisible(expanded // 4, 8), nn.ReLU, nn.Hardsigmoid))
        layers.append(ConvNormAct(expanded, cout, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)
        return y + x if self.use_res else y


class MobileNetV3Small(nn.Module):
    # input channels, kernel, expanded channels, output channels, squeeze-excite, activation, stride
    SETTINGS = [(16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2), (24, 3, 88, 24, False, "RE", 1),
                (24, 5, 96, 40, True, "HS", 2), (40, 5, 240, 40, True, "HS", 1), (40, 5, 240, 40, True, "HS", 1),
                (40, 5, 120, 48, True, "HS", 1), (48, 5, 144, 48, True, "HS", 1), (48, 5, 288, 96, True, "HS", 2),
                (96, 5, 576, 96, True, "HS", 1), (96, 5, 576, 96, True, "HS", 1)]

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        norm = partial(nn.BatchNorm2d, eps=0.001, momentum=0.01)
        acts = {"RE": nn.ReLU, "HS": nn.Hardswish}
        layers = [ConvNormAct(3, 16, 3, 2, act=nn.Hardswish, norm=norm)]
        for cin, k, exp, cout, se, act, s in self.SETTINGS:
            block = InvertedResidualV3(cin, k, exp, cout, se, acts[act], s)
            for m in block.modules():  # the blocks' norms are built with torchvision's eps too
                if isinstance(m, nn.BatchNorm2d):
                    m.eps, m.momentum = 0.001, 0.01
            layers.append(block)
        layers.append(ConvNormAct(96, 576, 1, act=nn.Hardswish, norm=norm))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(inplace=True), nn.Dropout(dropout),
                                        nn.Linear(1024, num_classes))
        _torchvision_init(self)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------------------
# EfficientNet-B0


class MBConv(nn.Module):
    def __init__(self, expand_ratio, k, stride, cin, cout, norm):
        super().__init__()
        self.use_res = stride == 1 and cin == cout
        expanded = _make_divisible(cin * expand_ratio, 8)
        layers = []
        if expanded != cin:
            layers.append(ConvNormAct(cin, expanded, 1, act=nn.SiLU, norm=norm))
        layers.append(ConvNormAct(expanded, expanded, k, stride, groups=expanded, act=nn.SiLU, norm=norm))
        layers.append(SqueezeExcitation(expanded, max(1, cin // 4), nn.SiLU, nn.Sigmoid))
        layers.append(ConvNormAct(expanded, cout, 1, act=None, norm=norm))
        self.block = nn.Sequential(*layers)

    def forward(self, x):
        y = self.block(x)  # stochastic depth is the identity at inference
        return y + x if self.use_res else y


class EfficientNetB0(nn.Module):
    # expansion, kernel, stride, input channels, output channels, layers
    SETTINGS = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
                (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]

    def __init__(self, num_classes=1000, dropout=0.2):
        super().__init__()
        norm = partial(nn.BatchNorm2d, eps=1e-5)
        layers = [ConvNormAct(3, 32, 3, 2, act=nn.SiLU, norm=norm)]
        for t, k, s, cin, cout, n in self.SETTINGS:
            stage = []
            for i in range(n):
                stage.append(MBConv(t, k, s if i == 0 else 1, cin if i == 0 else cout, cout, norm))
            layers.append(nn.Sequential(*stage))
        layers.append(ConvNormAct(320, 1280, 1, act=nn.SiLU, norm=norm))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(dropout, inplace=True), nn.Linear(1280, num_classes))
        _torchvision_init(self)

    def forward(self, x):
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


# ------------------------------------------------------------------------------------------------
# ShuffleNetV2 x1.0


def channel_shuffle(x, groups: int):
    b, c, h, w = x.shape
    x = x.view(b, groups, c // groups, h, w)
    return torch.transpose(x, 1, 2).contiguous().view(b, -1, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        bf = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False), nn.BatchNorm2d(cin),
                nn.Conv2d(cin, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(cin if stride > 1 else bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True),
            nn.Conv2d(bf, bf, 3, stride, 1, groups=bf, bias=False), nn.BatchNorm2d(bf),
            nn.Conv2d(bf, bf, 1, bias=False), nn.BatchNorm2d(bf), nn.ReLU(inplace=True))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, repeats=(4, 8, 4), channels=(24, 116, 232, 464, 1024), num_classes=1000):
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, channels[0], 3, 2, 1, bias=False), nn.BatchNorm2d(channels[0]),
                                   nn.ReLU(inplace=True))
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = channels[0]
        stages = []
        for n, cout in zip(repeats, channels[1:4]):
            stages.append(nn.Sequential(ShuffleUnit(cin, cout, 2), *[ShuffleUnit(cout, cout, 1) for _ in range(n - 1)]))
            cin = cout
        self.stage2, self.stage3, self.stage4 = stages
        self.conv5 = nn.Sequential(nn.Conv2d(cin, channels[4], 1, bias=False), nn.BatchNorm2d(channels[4]),
                                   nn.ReLU(inplace=True))
        self.fc = nn.Linear(channels[4], num_classes)

    def forward(self, x):
        x = self.maxpool(self.conv1(x))
        x = self.conv5(self.stage4(self.stage3(self.stage2(x))))
        return self.fc(x.mean([2, 3]))


# ------------------------------------------------------------------------------------------------
# DenseNet-121


class DenseLayer(nn.Module):
    def __init__(self, cin, growth, bn_size):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(cin)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(cin, bn_size * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False)

    def forward(self, features):
        x = torch.cat(features, 1)
        return self.conv2(self.relu2(self.norm2(self.conv1(self.relu1(self.norm1(x))))))


class DenseBlock(nn.ModuleDict):
    def __init__(self, layers, cin, growth, bn_size):
        super().__init__()
        for i in range(layers):
            self[f"denselayer{i + 1}"] = DenseLayer(cin + i * growth, growth, bn_size)

    def forward(self, x):
        features = [x]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    def __init__(self, growth=32, blocks=(6, 12, 24, 16), init_features=64, bn_size=4, num_classes=1000):
        super().__init__()
        f = [("conv0", nn.Conv2d(3, init_features, 7, 2, 3, bias=False)), ("norm0", nn.BatchNorm2d(init_features)),
             ("relu0", nn.ReLU(inplace=True)), ("pool0", nn.MaxPool2d(3, 2, 1))]
        c = init_features
        for i, n in enumerate(blocks):
            f.append((f"denseblock{i + 1}", DenseBlock(n, c, growth, bn_size)))
            c += n * growth
            if i != len(blocks) - 1:
                f.append((f"transition{i + 1}", nn.Sequential(
                    nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2, 2))))
                c //= 2
        f.append(("norm5", nn.BatchNorm2d(c)))
        self.features = nn.Sequential()
        for name, m in f:
            self.features.add_module(name, m)
        self.classifier = nn.Linear(c, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight)
            elif isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.relu(self.features(x))
        return self.classifier(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ------------------------------------------------------------------------------------------------
# SqueezeNet 1.0 / 1.1


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, e1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1x1(x)), F.relu(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, version="1_1", num_classes=1000):
        super().__init__()
        pool = partial(nn.MaxPool2d, 3, 2, ceil_mode=True)
        if version == "1_0":
            self.features = nn.Sequential(
                nn.Conv2d(3, 96, 7, 2), nn.ReLU(inplace=True), pool(),
                Fire(96, 16, 64, 64), Fire(128, 16, 64, 64), Fire(128, 32, 128, 128), pool(),
                Fire(256, 32, 128, 128), Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
                pool(), Fire(512, 64, 256, 256))
        else:
            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, 2), nn.ReLU(inplace=True), pool(),
                Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(),
                Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
        final = nn.Conv2d(512, num_classes, 1)
        self.classifier = nn.Sequential(nn.Dropout(0.5), final, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1))
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                if m is final:
                    nn.init.normal_(m.weight, 0, 0.01)
                else:
                    nn.init.kaiming_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


# ------------------------------------------------------------------------------------------------
# VGG-11 / VGG-16 (no batch norm): weight-bound, 133 M / 138 M parameters, most in the first Linear

_VGG_LAYERS = {"vgg11": (64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"),
               "vgg16": (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")}


class VGG(nn.Module):
    def __init__(self, layers, num_classes=1000, dropout=0.5):
        super().__init__()
        features, cin = [], 3
        for c in layers:
            if c == "M":
                features.append(nn.MaxPool2d(2, 2))
            else:
                features += [nn.Conv2d(cin, c, 3, padding=1), nn.ReLU(inplace=True)]
                cin = c
        self.features = nn.Sequential(*features)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Dropout(dropout),
            nn.Linear(4096, 4096), nn.ReLU(True), nn.Dropout(dropout), nn.Linear(4096, num_classes))
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# ------------------------------------------------------------------------------------------------
# ViT-B/16


class EncoderBlock(nn.Module):
    def __init__(self, heads, hidden, mlp):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(), nn.Linear(mlp, hidden))

    def forward(self, x):
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class VisionTransformer(nn.Module):
    def __init__(self, image=224, patch=16, layers=12, heads=12, hidden=768, mlp=3072, num_classes=1000):
        super().__init__()
        self.patch, self.hidden = patch, hidden
        self.conv_proj = nn.Conv2d(3, hidden, patch, patch)
        seq = (image // patch) ** 2 + 1
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, hidden).normal_(std=0.02))
        self.layers = nn.Sequential(*[EncoderBlock(heads, hidden, mlp) for _ in range(layers)])
        self.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, num_classes)
        fan_in = 3 * patch * patch
        nn.init.trunc_normal_(self.conv_proj.weight, std=math.sqrt(1 / fan_in))
        nn.init.zeros_(self.conv_proj.bias)

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.hidden, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        x = self.ln(self.layers(x))
        return self.head(x[:, 0])


# ------------------------------------------------------------------------------------------------
# the zoo

MODELS = {
    "resnet18": lambda: ResNet(BasicBlock, [2, 2, 2, 2]),
    "resnet50": lambda: ResNet(Bottleneck, [3, 4, 6, 3]),
    "squeezenet1_0": lambda: SqueezeNet("1_0"),
    "squeezenet1_1": lambda: SqueezeNet("1_1"),
    "mobilenet_v2": MobileNetV2,
    "mobilenet_v3_small": MobileNetV3Small,
    "efficientnet_b0": EfficientNetB0,
    "shufflenet_v2_x1_0": ShuffleNetV2,
    "densenet121": DenseNet,
    "vit_b_16": VisionTransformer,
    "vgg11": lambda: VGG(_VGG_LAYERS["vgg11"]),
    "vgg16": lambda: VGG(_VGG_LAYERS["vgg16"]),
}

OPSET = {"vit_b_16": 14}  # PyTorch's exporter needs 14 for its attention; the CNNs export at 11


def _torchvision(name):
    try:
        import torchvision.models as tvm  # noqa: F401
    except Exception:  # torchvision absent, or built for another torch (its C++ ops fail to load)
        return None
    return getattr(tvm, name)(weights=None)


def randomize_batch_norm(model, seed: int = 0):
    """Give every batch norm non-trivial running statistics and affine parameters (as a trained
    model has), so that an inference comparison exercises them; keeps the scale of activations."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(0.1 * torch.randn(c, generator=g))
                m.running_var.copy_(0.75 + 0.5 * torch.rand(c, generator=g))
                m.weight.copy_(0.75 + 0.5 * torch.rand(c, generator=g))
                m.bias.copy_(0.1 * torch.randn(c, generator=g))
    return model


def build(name: str, seed: int = 0, use_torchvision: bool = True) -> nn.Module:
    """The model `name` of MODELS with random weights (seeded), in eval mode."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; the zoo has {', '.join(MODELS)}")
    torch.manual_seed(seed)
    model = (_torchvision(name) if use_torchvision else None) or MODELS[name]()
    return randomize_batch_norm(model, seed).eval()


def input_shape(name: str, batch: int = 1) -> tuple:
    return (batch, 3, 224, 224)


def export_onnx(model: nn.Module, name: str, batch: int = 1, training: bool = False) -> bytes:
    """The ONNX bytes PyTorch's (TorchScript) exporter writes for `model` at its opset."""
    x = torch.zeros(input_shape(name, batch))
    buf = io.BytesIO()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, buf, opset_version=OPSET.get(name, 11), input_names=["input"],
                          output_names=["logits"], training=mode, do_constant_folding=not training, dynamo=False)
    return buf.getvalue()


if __name__ == "__main__":
    import collections
    import sys

    import onnx

    for name in sys.argv[1:] or list(MODELS):
        m = build(name)
        proto = onnx.load_from_string(export_onnx(m, name))
        ops = collections.Counter(n.op_type for n in proto.graph.node)
        params = sum(p.numel() for p in m.parameters())
        print(f"{name}: {params / 1e6:.2f} M parameters; ONNX ops: {dict(ops)}")
