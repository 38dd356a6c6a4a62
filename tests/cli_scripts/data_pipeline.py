"""paddle.io.Dataset/DataLoader with paddle.vision.transforms over numpy images, seeded shuffle."""
import argparse

import numpy as np
import paddle
from paddle.io import DataLoader, Dataset
from paddle.vision import transforms


class NumpyImages(Dataset):
    def __init__(self, count, transform, seed):
        rng = np.random.default_rng(seed)
        self.images = rng.integers(0, 256, size=(count, 12, 12, 3), dtype=np.uint8)
        self.labels = rng.integers(0, 4, size=(count,)).astype("int64")
        self.transform = transform

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        image = self.images[index]
        if index % 2:  # a deterministic flip (random ones would differ between worker processes)
            image = image[:, ::-1]
        image = self.transform(image).astype("float32")
        return image, self.labels[index]


class SmallConvNet(paddle.nn.Layer):
    def __init__(self, classes=4):
        super().__init__()
        self.conv = paddle.nn.Conv2D(3, 6, 3, padding=1)
        self.pool = paddle.nn.AdaptiveAvgPool2D(2)
        self.fc = paddle.nn.Linear(6 * 2 * 2, classes)

    def forward(self, x):
        x = paddle.nn.functional.relu(self.conv(x))
        x = self.pool(x)
        return self.fc(paddle.flatten(x, 1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=0)
    args = parser.parse_args()
    paddle.seed(1)
    np.random.seed(1)
    # numpy in, numpy out (HWC uint8 -> CHW float32): what worker processes can send back safely.
    transform = transforms.Compose([
        transforms.Transpose(),
        transforms.Normalize(mean=[127.5, 127.5, 127.5], std=[64.0, 64.0, 64.0], data_format="CHW"),
    ])
    dataset = NumpyImages(32, transform, seed=3)
    loader = DataLoader(dataset, batch_size=8, shuffle=True, num_workers=args.workers, drop_last=False)
    model = SmallConvNet()
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    for epoch in range(2):
        seen = []
        for batch_id, (images, labels) in enumerate(loader):
            logits = model(images)
            loss = paddle.nn.functional.cross_entropy(logits, labels)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            seen.append(int(labels.sum()))
            print(f"epoch {epoch} batch {batch_id} shape {images.shape} loss {loss.item():.6f}")
        print("label sums", seen)


if __name__ == "__main__":
    main()
