"""fleet-agent: the node agent of the GPU fleet control plane.

Depends only on the standard library and nvidia-ml-py, and never on the server (it ships alone).
"""

__version__ = "0.1.0"
