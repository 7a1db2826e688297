"""heloom.runtime: threads, HE task graphs and the scheduler's simulation (seed 000).

``GraphBuilder`` records operations on symbolic ``Value`` objects into a ``TaskGraph`` of the
paper's fused task kinds; ``exp_graph`` and ``polynomial_graph`` build the runtime's graphs;
``TaskGraph.run`` executes one and ``TaskGraph.work_ms`` prices it; ``simulate`` runs the
discrete-event simulation of a stream of e^x jobs under a thread policy (``POLICIES``) and a
cost profile (``profile_names()``); ``cores()`` is this machine's core count.
"""

from heloom._heloom import (
    POLICIES,
    GraphBuilder,
    GraphError,
    TaskGraph,
    Value,
    cores,
    exp_graph,
    polynomial_graph,
    profile_names,
    simulate,
)

__all__ = [
    "POLICIES",
    "GraphBuilder",
    "GraphError",
    "TaskGraph",
    "Value",
    "cores",
    "exp_graph",
    "polynomial_graph",
    "profile_names",
    "simulate",
]
