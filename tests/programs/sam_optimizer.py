"""SAM (Sharpness-Aware Minimization), the optimizer of github.com/davda54/sam as its README prints it, and its
two loops: ``first_step`` / ``second_step`` around two backward passes, and ``step(closure)``. Its
``second_step`` sets ``p.data = self.state[p]["old_p"]`` (a tensor of the optimizer's state) and its
``step`` evaluates the closure at the perturbed weights. Imports only torch (the DDP runner must not
import multidev)."""

from __future__ import annotations

import torch


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"

        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)

        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)

            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.data.clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"

        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data = self.state[p]["old_p"]  # get back to "w" from "w + e(w)"

        self.base_optimizer.step()  # do the actual "sharpness-aware" update

        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # the closure should do a full forward-backward pass

        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device  # put everything on the same device, in case of model parallelism
        norm = torch.norm(
                    torch.stack([
                        ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                        for group in self.param_groups for p in group["params"]
                        if p.grad is not None
                    ]),
                    p=2
               )
        return norm

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self.base_optimizer.param_groups = self.param_groups


def sam_two_steps(loss_of):
    """The README's loop: the first backward, ``first_step``, the second backward at ``w + e(w)``,
    ``second_step`` (which steps the base optimizer)."""
    def step(state, batch, i):
        opt = state["opt"]
        lr = opt.param_groups[0]["lr"]
        loss = loss_of(state, batch)
        loss.backward()
        opt.first_step(zero_grad=True)
        loss_of(state, batch).backward()
        opt.second_step(zero_grad=True)
        return loss.detach(), torch.tensor(float(lr), dtype=torch.float64)
    return step


def sam_closure(loss_of):
    """The README's closure form: the first backward, then ``optimizer.step(closure)``."""
    def step(state, batch, i):
        opt = state["opt"]
        lr = opt.param_groups[0]["lr"]

        def closure():
            loss = loss_of(state, batch)
            loss.backward()
            return loss

        loss = loss_of(state, batch)
        loss.backward()
        opt.step(closure)
        opt.zero_grad()
        return loss.detach(), torch.tensor(float(lr), dtype=torch.float64)
    return step
