"""Datasets the DataLoader tests read (importable, so spawned worker processes can unpickle them)."""
import torch


class Squares(torch.utils.data.Dataset):
    def __init__(self, n=48, dim=3):
        self.n, self.dim = n, dim

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.full((self.dim,), float(i)), torch.tensor(i * i)


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, n=20):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield torch.tensor([float(i)])
