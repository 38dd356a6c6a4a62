"""A small training script as users write them: argparse, main(), logging, a progress line with \r."""
import argparse
import logging
import sys

import numpy as np
import paddle

logger = logging.getLogger("train_cli")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="train a tiny MLP")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def build_model(hidden):
    return paddle.nn.Sequential(
        paddle.nn.Linear(8, hidden), paddle.nn.ReLU(),
        paddle.nn.Linear(hidden, hidden), paddle.nn.Tanh(),
        paddle.nn.Linear(hidden, 1))


def progress(step, total, loss):
    done = int(20 * step / total)
    sys.stdout.write(f"\r[{'#' * done}{'.' * (20 - done)}] {step}/{total} loss={loss:.6f}")
    sys.stdout.flush()


def train_step(model, optimizer, x, y):
    pred = model(x)
    loss = paddle.nn.functional.mse_loss(pred, y)
    loss.backward()
    optimizer.step()
    optimizer.clear_grad()
    return loss


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stdout)
    paddle.seed(args.seed)
    rng = np.random.default_rng(args.seed)
    xs = rng.standard_normal((args.steps, 4, 8)).astype("float32")
    ys = xs.sum(axis=2, keepdims=True).astype("float32") * 0.5
    model = build_model(args.hidden)
    optimizer = paddle.optimizer.SGD(learning_rate=args.lr, parameters=model.parameters())
    logger.info("training for %d epochs of %d steps", args.epochs, args.steps)
    for epoch in range(args.epochs):
        total = 0.0
        for step in range(args.steps):
            loss = train_step(model, optimizer, paddle.to_tensor(xs[step]), paddle.to_tensor(ys[step]))
            total += loss.item()
            progress(step + 1, args.steps, loss.item())
        sys.stdout.write("\n")
        logger.info("epoch %d mean loss %.6f", epoch, total / args.steps)
    print("final weight sum", f"{float(model[0].weight.sum()):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
