"""Evaluation under no_grad/eval(), numpy metrics, early stopping, save/load of state dicts, resuming."""
import argparse
import os
import sys
import tempfile

import numpy as np
import paddle


class Classifier(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = paddle.nn.Sequential(paddle.nn.Linear(4, 16), paddle.nn.BatchNorm1D(16), paddle.nn.ReLU(),
                                         paddle.nn.Dropout(0.2), paddle.nn.Linear(16, 3))

    def forward(self, x):
        return self.body(x)


def make_data(seed, count=60):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((count, 4)).astype("float32")
    y = (x[:, 0] > 0).astype("int64") + (x[:, 1] > 0.5).astype("int64")
    return x, y


def evaluate(model, x, y):
    model.eval()
    with paddle.no_grad():
        logits = model(paddle.to_tensor(x))
        loss = paddle.nn.functional.cross_entropy(logits, paddle.to_tensor(y))
    model.train()
    predictions = np.argmax(logits.numpy(), axis=1)
    return float(loss), float((predictions == y).mean())


def train(model, optimizer, x, y, epochs, start_epoch, ckpt_dir, patience=2):
    best, waited = -1.0, 0
    for epoch in range(start_epoch, epochs):
        for i in range(0, len(x), 20):
            loss = paddle.nn.functional.cross_entropy(model(paddle.to_tensor(x[i:i + 20])),
                                                      paddle.to_tensor(y[i:i + 20]))
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
        val_loss, accuracy = evaluate(model, *make_data(99, 30))
        print(f"epoch {epoch} train {loss.item():.6f} val {val_loss:.6f} acc {accuracy:.4f}")
        paddle.save(model.state_dict(), os.path.join(ckpt_dir, "model.pdparams"))
        paddle.save(optimizer.state_dict(), os.path.join(ckpt_dir, "opt.pdopt"))
        paddle.save({"epoch": epoch}, os.path.join(ckpt_dir, "meta.pkl"))
        if accuracy > best + 1e-9:
            best, waited = accuracy, 0
        else:
            waited += 1
            if waited >= patience:
                print("early stop at epoch", epoch)
                break
    return best


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("ckpt_dir")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    paddle.seed(5)
    x, y = make_data(0)
    model = Classifier()
    optimizer = paddle.optimizer.Momentum(learning_rate=0.1, parameters=model.parameters())
    start = 0
    if args.resume:
        model.set_state_dict(paddle.load(os.path.join(args.ckpt_dir, "model.pdparams")))
        optimizer.set_state_dict(paddle.load(os.path.join(args.ckpt_dir, "opt.pdopt")))
        start = paddle.load(os.path.join(args.ckpt_dir, "meta.pkl"))["epoch"] + 1
        print("resume from", start)
    print("best", train(model, optimizer, x, y, args.epochs, start, args.ckpt_dir))
    # A round trip through a temporary directory into a fresh model gives the same evaluation.
    with tempfile.TemporaryDirectory() as scratch:
        paddle.save(model.state_dict(), os.path.join(scratch, "copy.pdparams"))
        copy = Classifier()
        copy.set_state_dict(paddle.load(os.path.join(scratch, "copy.pdparams")))
    print("same eval", evaluate(model, x, y) == evaluate(copy, x, y))
    with open(os.path.join(args.ckpt_dir, "metrics.txt"), "w") as f:
        f.write(f"{evaluate(model, x, y)[1]:.4f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
