"""Models from paddle.vision.models on tiny inputs: a few training steps, then inference."""
import numpy as np
import paddle
from paddle.vision.models import LeNet, resnet18


def train_a_few_steps(model, shape, classes, steps=3):
    paddle.seed(3)
    rng = np.random.default_rng(3)
    optimizer = paddle.optimizer.Momentum(learning_rate=0.01, momentum=0.9, parameters=model.parameters())
    for step in range(steps):
        x = paddle.to_tensor(rng.standard_normal(shape).astype("float32"))
        y = paddle.to_tensor(rng.integers(0, classes, (shape[0], 1)).astype("int64"))
        loss = paddle.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.clear_grad()
        print(f"{type(model).__name__} step {step} loss {loss.item():.6f}")
    model.eval()
    with paddle.no_grad():
        out = model(paddle.to_tensor(rng.standard_normal(shape).astype("float32")))
    print(type(model).__name__, "eval", out.shape, f"{float(out.abs().sum()):.5f}")


if __name__ == "__main__":
    paddle.seed(0)
    train_a_few_steps(LeNet(num_classes=10), (2, 1, 28, 28), 10)
    paddle.seed(0)
    train_a_few_steps(resnet18(num_classes=5), (2, 3, 32, 32), 5)
