"""hv.torch.sync_batch_norm: Horovod's SyncBatchNorm: batch normalisation whose statistics are
those of the global batch (every rank's samples), in training; in evaluation the running
statistics, as torch's BatchNorm.

The statistics are sums over all ranks (hv.torch's allreduce, Sum): the sample count and the
sum of x per channel, then the sum of (x - mean)^2 per channel (two passes: stable). They go
through an autograd function whose backward is the allreduce of the gradient (the gradient of
a sum over ranks with respect to one rank's term is the sum over ranks of the upstream
gradients), so torch's autograd computes the exact gradient of the global batch's
normalisation. The allreduces are unnamed: every rank runs the same layers in the same order,
forward and backward. Re-exported by hv.torch; tested by tests/python/horovod/
pytorch_sync_batch_norm.py (against BatchNorm on the whole batch in one process).
"""

import torch
import torch.nn.functional as F

from .. import _lib
from . import _ops


class _SumOverRanks(torch.autograd.Function):
    """y = the sum over ranks of x (a new tensor); dL/dx = the sum over ranks of dL/dy."""

    @staticmethod
    def forward(ctx, x):
        return _ops.allreduce(x.detach(), op=_ops.Sum)

    @staticmethod
    def backward(ctx, grad):
        return _ops.allreduce(grad.contiguous(), op=_ops.Sum)


class SyncBatchNorm(torch.nn.modules.batchnorm._BatchNorm):
    """Horovod's hvd.SyncBatchNorm(num_features, eps=1e-5, momentum=0.1, affine=True,
    track_running_stats=True): BatchNorm over the samples of every rank. Input (N, C, ...)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError("hv.torch.SyncBatchNorm: expected an input of 2 or more "
                             "dimensions (N, C, ...), got %dD" % x.dim())

    def forward(self, x):
        self._check_input_dim(x)
        if not self.training or _lib.hv_size() <= 1:
            return self._local(x)
        dims = [0] + list(range(2, x.dim()))
        c = x.shape[1]
        local_n = x.numel() // c if c else 0
        s = _SumOverRanks.apply(torch.cat([x.sum(dims), x.new_tensor([float(local_n)])]))
        n = s[-1]
        if float(n) <= 1:
            raise ValueError("hv.torch.SyncBatchNorm: expected more than 1 value per channel "
                             "over all ranks when training, got %d" % int(n))
        mean = s[:-1] / n
        shape = [1, c] + [1] * (x.dim() - 2)
        centred = x - mean.view(shape)
        var = _SumOverRanks.apply((centred * centred).sum(dims)) / n
        y = centred * torch.rsqrt(var + self.eps).view(shape)
        if self.affine:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        if self.track_running_stats:
            self._update_running(mean.detach(), var.detach() * (n / (n - 1)))
        return y

    def _update_running(self, mean, unbiased_var):
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            m = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                 else self.momentum)
            self.running_mean.mul_(1 - m).add_(mean.to(self.running_mean.dtype), alpha=m)
            self.running_var.mul_(1 - m).add_(unbiased_var.to(self.running_var.dtype), alpha=m)

    def _local(self, x):
        """torch's BatchNorm: evaluation with running statistics, or one rank's batch."""
        use_batch = self.training or not self.track_running_stats
        m = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                m = 1.0 / float(self.num_batches_tracked)
        return F.batch_norm(x, self.running_mean if self.track_running_stats else None,
                            self.running_var if self.track_running_stats else None,
                            self.weight, self.bias, use_batch, m, self.eps)
