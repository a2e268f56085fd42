"""sandlet across a Ray cluster: one node actor per node owns that node's runtime; a cluster-wide client
places sandboxes on nodes with room and routes every call to the owning node (docs/RAY.md).

    import ray, sandlet.ray
    ray.init(address="auto")
    cluster = sandlet.ray.Cluster()
    sb = cluster.create(environment="swe-task", labels={"job": "rl-7"}, limits={"memory": "1G"})
    print(sb.exec("python -c 'print(6 * 7)'").stdout_text)
    cluster.pause({"job": "rl-7"})            # the trainer is preempted: every node freezes the job
"""
from ._cluster import CAPACITY_RESOURCE, MEMORY_RESOURCE, NAMESPACE, Cluster, ClusterSandbox, node_actor_name
from ._node import NodeInfo, Outcome

__all__ = ["Cluster", "ClusterSandbox", "NodeInfo", "Outcome", "CAPACITY_RESOURCE", "MEMORY_RESOURCE", "NAMESPACE",
           "node_actor_name"]
