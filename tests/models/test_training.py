"""Training loops the way users write them, around zoo models: ``paddle.amp.auto_cast`` in the step, a
`GradScaler`, gradient clipping (`ClipGradByGlobalNorm`), an LR scheduler, batches of changing size; and
dropout left on, in train mode (the same seed gives the same mask) and in eval mode."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import paddle
import paddle.nn.functional as F

import sot

from .harness import assert_close, assert_grads_equal, assert_state_equal, make_pair, stats_line
from .zoo_user import USER, ViT, image_batch

STEPS = 5


def make_optimizer(model: paddle.nn.Layer) -> tuple[Any, Any, Any]:
    """(scheduler, optimizer, scaler): AdamW with weight decay and global-norm clipping, cosine LR."""
    scheduler = paddle.optimizer.lr.CosineAnnealingDecay(learning_rate=1e-2, T_max=STEPS)
    optimizer = paddle.optimizer.AdamW(learning_rate=scheduler, parameters=model.parameters(), weight_decay=0.01,
                                       grad_clip=paddle.nn.ClipGradByGlobalNorm(0.5))
    return scheduler, optimizer, paddle.amp.GradScaler(init_loss_scaling=1024)


def train_step(model: Any, optimizer: Any, scheduler: Any, scaler: Any, images: paddle.Tensor,
               labels: paddle.Tensor) -> paddle.Tensor:
    with paddle.amp.auto_cast():
        loss = F.cross_entropy(model(images), labels)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.clear_grad()
    scheduler.step()
    return loss


def batches() -> list[tuple[paddle.Tensor, paddle.Tensor]]:
    """Batch sizes 2 and 3 alternating (the last batch of an epoch is often smaller)."""
    out = []
    for step in range(STEPS):
        (images,) = image_batch(2 + step % 2, seed=step)
        out.append((images, paddle.to_tensor(np.arange(images.shape[0]) % 10)))
    return out


def run_loop(translate_step: bool) -> sot.Stats:
    model, eager = make_pair(USER["vit_hand_attention"])
    (scheduler, optimizer, scaler), eager_parts = make_optimizer(model), make_optimizer(eager)
    step_fn = sot.symbolic_translate(train_step) if translate_step else train_step
    forward = model if translate_step else sot.symbolic_translate(model)
    losses, eager_losses = [], []
    for images, labels in batches():
        losses.append(float(step_fn(forward, optimizer, scheduler, scaler, images, labels)))
        eager_losses.append(float(train_step(eager, eager_parts[1], eager_parts[0], eager_parts[2], images, labels)))
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6, err_msg="loss curve")
    assert_state_equal(model, eager)
    assert scheduler.last_lr == eager_parts[0].last_lr
    return sot.stats()


def test_amp_clipping_and_scheduler_around_a_translated_forward() -> None:
    """The forward, called inside ``auto_cast`` from an eager loop: one graph per batch size, no break."""
    stats = run_loop(translate_step=False)
    message = stats_line(stats)
    assert stats.graph_breaks == 0 and stats.fallbacks == 0, message
    # batch 2, then batch 3 (retranslated with a symbolic batch dimension); later steps hit the cache
    assert stats.translate_count == 2 and stats.compiled_graphs == 2, message


def test_a_translated_training_step_matches_eager() -> None:
    """The whole step translated: the optimizer, scaler and scheduler calls run natively (graph breaks),
    the forward inside ``auto_cast`` is compiled, and nothing falls back."""
    stats = run_loop(translate_step=True)
    assert stats.fallbacks == 0, stats_line(stats)
    assert stats.compiled_graphs >= 1, stats_line(stats)


def test_dropout_in_train_mode_draws_the_eager_mask_and_is_off_in_eval() -> None:
    """A ViT with its dropout layers left at p=0.5: with the same seed before each call the compiled program
    drops the same elements as eager (outputs and gradients equal); eval mode is deterministic and equal."""
    paddle.seed(3)
    model = ViT(dropout=0.5)
    eager = copy.deepcopy(model)
    fast = sot.symbolic_translate(model)
    (images,) = image_batch()
    outputs = []
    for call in range(3):
        paddle.seed(100 + call)
        out = fast(images)
        paddle.seed(100 + call)
        expected = eager(images)
        assert_close(out, expected, f"train-mode output with dropout (call {call})")
        out.sum().backward()
        expected.sum().backward()
        assert_grads_equal(model, eager)
        model.clear_gradients()
        eager.clear_gradients()
        outputs.append(out.numpy())
    assert not np.allclose(outputs[0], outputs[1]), "dropout must be active in train mode"
    model.eval()
    eager.eval()
    for call in range(2):
        assert_close(fast(images), eager(images), f"eval-mode output (call {call})")
    stats = sot.stats()
    assert stats.graph_breaks == 0 and stats.fallbacks == 0 and stats.translate_count == 2, stats_line(stats)
