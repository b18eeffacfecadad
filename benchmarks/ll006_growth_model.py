"""The training script the LL006 benchmark and test run: written the way the PyTorch FAQ's
first item warns against (loss tensors accumulated across the loop), and a validation loop
that forgot `torch.no_grad()`. `lifetime-lint --fix` rewrites a copy of this file; the
benchmark runs both. Imports only torch."""

import torch.nn.functional as F
from torch import nn


class MLPRegressor(nn.Module):
    def __init__(self, features: int, hidden: int, depth: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Linear(features, hidden), nn.GELU()]
        for _ in range(depth - 1):
            layers += [nn.Linear(hidden, hidden), nn.LayerNorm(hidden), nn.GELU()]
        layers.append(nn.Linear(hidden, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def fit(model, train_batches, val_batches, optimizer, on_train_step, on_val_step):
    """One epoch of training and one of validation, reporting running losses as it goes."""
    model.train()
    total_loss = 0.0
    step_losses = []
    for step, (x, y) in enumerate(train_batches):
        optimizer.zero_grad(set_to_none=True)
        prediction = model(x)
        loss = F.mse_loss(prediction, y)
        loss.backward()
        optimizer.step()
        total_loss += loss
        step_losses.append(loss)
        on_train_step(step, total_loss, step_losses)

    model.eval()
    val_loss = 0.0
    for step, (x, y) in enumerate(val_batches):
        val_prediction = model(x)
        val_loss += F.mse_loss(val_prediction, y)
        on_val_step(step, val_loss)
    return total_loss, step_losses, val_loss
