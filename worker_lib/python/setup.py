"""setup.py: the hv wheel's metadata. worker_lib/python/build_wheel.sh stages the hv package with
the build's libhv.so inside it (hv/libhv.so, where hv._lib looks first) beside this file and runs
`pip wheel` there, offline. The package is pure Python over libhv through ctypes, so the wheel
runs on any Python 3, but it carries a shared library: it is tagged py3-none-<platform>.
See docs/python.md, "Install".
"""

import os

from setuptools import setup
from setuptools.dist import Distribution

try:
    from wheel.bdist_wheel import bdist_wheel
except ImportError:  # (no wheel package: pip reports that it cannot build a wheel)
    bdist_wheel = None


class BinaryDistribution(Distribution):
    """libhv.so inside: a platform wheel, installed in platlib."""

    def has_ext_modules(self):
        return True


cmdclass = {}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """py3-none-<platform>: any Python 3 (no compiled extension), this platform's libhv."""

        def get_tag(self):
            return ("py3", "none", super().get_tag()[2])

    cmdclass["bdist_wheel"] = PlatformWheel

setup(
    name="hv",
    version=os.environ.get("HV_WHEEL_VERSION", "0.0.0"),
    description="hv's worker library for Python: Horovod's PyTorch API (hv.torch), elastic "
                "training and actors over libhv",
    long_description="The hv package (import hv.torch as hvd) with libhv inside. torch is the "
                     "user's (a system or virtual-environment install); libhv's own shared "
                     "libraries (gRPC, protobuf-c, libuv; CUDA and NCCL when built with them) "
                     "come from the system.",
    packages=["hv", "hv.torch", "hv.torch.elastic"],
    package_data={"hv": ["libhv.so"]},
    python_requires=">=3.7",
    distclass=BinaryDistribution,
    cmdclass=cmdclass,
    zip_safe=False,
)
