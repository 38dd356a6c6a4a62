"""LR schedulers, gradient clipping, AMP GradScaler/auto_cast (a no-op on CPU), weight decay, hand-written EMA."""
import copy

import numpy as np
import paddle


class MLP(paddle.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = paddle.nn.Linear(6, 12)
        self.fc2 = paddle.nn.Linear(12, 3)

    def forward(self, x):
        return self.fc2(paddle.nn.functional.gelu(self.fc1(x)))


class EMA:
    """Exponential moving average of the weights, kept in a dict of tensors."""

    def __init__(self, model, decay=0.9):
        self.decay = decay
        self.shadow = {name: p.detach().clone() for name, p in model.named_parameters()}

    @paddle.no_grad()
    def update(self, model):
        for name, p in model.named_parameters():
            self.shadow[name] = self.decay * self.shadow[name] + (1 - self.decay) * p.detach()


def run(scheduler_name):
    paddle.seed(7)
    model = MLP()
    if scheduler_name == "step":
        scheduler = paddle.optimizer.lr.StepDecay(learning_rate=0.05, step_size=3, gamma=0.5)
    else:
        scheduler = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=0.05, T_max=6)
    clip = paddle.nn.ClipGradByGlobalNorm(clip_norm=0.5)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=model.parameters(),
                                       weight_decay=0.01, grad_clip=clip)
    scaler = paddle.amp.GradScaler(init_loss_scaling=128.0)
    ema = EMA(model)
    rng = np.random.default_rng(0)
    for step in range(8):
        x = paddle.to_tensor(rng.standard_normal((5, 6)).astype("float32"))
        label = paddle.to_tensor(rng.integers(0, 3, (5,)).astype("int64"))
        with paddle.amp.auto_cast(level="O1"):
            loss = paddle.nn.functional.cross_entropy(model(x), label)
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.clear_grad()
        scheduler.step()
        ema.update(model)
        print(f"{scheduler_name} step {step} lr {optimizer.get_lr():.6f} loss {loss.item():.6f} "
              f"scaled {scaled.item():.4f}")
    ema_sum = sum(float(v.sum()) for v in ema.shadow.values())
    weight_sum = sum(float(p.sum()) for p in model.parameters())
    print(f"{scheduler_name} ema {ema_sum:.6f} weights {weight_sum:.6f}")
    snapshot = copy.deepcopy(model.state_dict())
    print(scheduler_name, "snapshot keys", sorted(snapshot))


if __name__ == "__main__":
    run("step")
    run("cosine")
