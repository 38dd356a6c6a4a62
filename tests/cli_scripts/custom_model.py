"""A model made of the script's own Layer subclasses, with a custom loss function."""
import numpy as np
import paddle
import paddle.nn.functional as F


class ResidualBlock(paddle.nn.Layer):
    def __init__(self, dim):
        super().__init__()
        self.norm = paddle.nn.LayerNorm(dim)
        self.fc1 = paddle.nn.Linear(dim, dim * 2)
        self.fc2 = paddle.nn.Linear(dim * 2, dim)

    def forward(self, x):
        return x + self.fc2(F.silu(self.fc1(self.norm(x))))


class TinyAttention(paddle.nn.Layer):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = paddle.nn.Linear(dim, dim * 3)
        self.out = paddle.nn.Linear(dim, dim)

    def forward(self, x):
        batch, length, dim = x.shape
        q, k, v = self.qkv(x).reshape([batch, length, 3, self.heads, dim // self.heads]).unbind(axis=2)
        q, k, v = (t.transpose([0, 2, 1, 3]) for t in (q, k, v))
        scores = paddle.matmul(q, k, transpose_y=True) / (dim // self.heads) ** 0.5
        mix = paddle.matmul(F.softmax(scores, axis=-1), v)
        return self.out(mix.transpose([0, 2, 1, 3]).reshape([batch, length, dim]))


class Net(paddle.nn.Layer):
    def __init__(self, dim=8, depth=2):
        super().__init__()
        self.embed = paddle.nn.Embedding(20, dim)
        self.blocks = paddle.nn.LayerList([ResidualBlock(dim) for _ in range(depth)])
        self.attention = TinyAttention(dim, heads=2)
        self.head = paddle.nn.Linear(dim, 2)

    def forward(self, tokens, return_features=False):
        h = self.embed(tokens)
        for block in self.blocks:
            h = block(h)
        h = h + self.attention(h)
        pooled = h.mean(axis=1)
        logits = self.head(pooled)
        if return_features:
            return logits, pooled
        return logits


def focal_loss(logits, labels, gamma=2.0, smoothing=0.1):
    probs = F.softmax(logits, axis=-1)
    one_hot = F.one_hot(labels, num_classes=logits.shape[-1])
    target = one_hot * (1 - smoothing) + smoothing / logits.shape[-1]
    pt = (probs * one_hot).sum(axis=-1)
    ce = -(target * paddle.log(probs + 1e-8)).sum(axis=-1)
    return ((1 - pt) ** gamma * ce).mean()


def main():
    paddle.seed(11)
    rng = np.random.default_rng(11)
    model = Net()
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    for step in range(10):
        length = 5 if step % 2 == 0 else 7
        tokens = paddle.to_tensor(rng.integers(0, 20, (4, length)).astype("int64"))
        labels = paddle.to_tensor((rng.random(4) > 0.5).astype("int64"))
        logits, features = model(tokens, return_features=True)
        loss = focal_loss(logits, labels) + 1e-3 * features.pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        print(f"step {step} len {length} loss {loss.item():.6f}")
    print("param count", sum(int(np.prod(p.shape)) for p in model.parameters()))


if __name__ == "__main__":
    main()
