"""mlfbuild: TVM Model Library Format → firmware."""

__version__ = "0.1.0"
