"""Small models of the three kinds people train: an MLP, a ResNet-style CNN block with batch
norm, a transformer encoder. Each returns (output, loss)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=12, hidden=24, classes=5):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x, labels):
        h = F.relu(self.fc1(x))
        h = F.gelu(self.fc2(h))
        logits = self.out(h)
        return logits, F.cross_entropy(logits, labels)


class BasicBlock(nn.Module):
    def __init__(self, c_in, c_out, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Sequential()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + self.shortcut(x))


class CNN(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.stem = nn.Conv2d(3, 6, 3, padding=1)
        self.block = BasicBlock(6, 8, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x, labels):
        y = F.max_pool2d(F.relu(self.stem(x)), 2)
        y = self.pool(self.block(y)).flatten(1)
        logits = self.fc(y)
        return logits, F.cross_entropy(logits, labels)


class Encoder(nn.Module):
    def __init__(self, vocab=20, d=16, heads=2, ff=32, layers=2, classes=3, seq=6):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens, labels):
        h = self.tok(tokens) + self.pos
        h = self.norm(self.encoder(h))
        logits = self.head(h.mean(1))
        return logits, F.cross_entropy(logits, labels)


def data(kind, batch, seed=1):
    g = torch.Generator().manual_seed(seed)
    if kind == "mlp":
        return torch.randn(batch, 12, generator=g), torch.randint(0, 5, (batch,), generator=g)
    if kind == "cnn":
        return torch.randn(batch, 3, 10, 10, generator=g), torch.randint(0, 4, (batch,), generator=g)
    return torch.randint(0, 20, (batch, 6), generator=g), torch.randint(0, 3, (batch,), generator=g)


def make(kind):
    return {"mlp": MLP, "cnn": CNN, "encoder": Encoder}[kind]()
