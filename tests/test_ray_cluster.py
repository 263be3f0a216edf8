"""`synprep convert --engine ray` on a cluster of several Ray nodes (local, ray.cluster_utils.Cluster)."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from synprep.convert.converter import Converter, ConvertOptions
from synprep.convert.pipeline import load_pipeline
from synprep.synth import write_corpus


def shard_files(out):
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(Path(out).glob("*/part-*.arrow"))}


@pytest.mark.slow
def test_ray_cluster_of_three_nodes_gives_the_local_shards(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from synprep.convert import ray_engine

    write_corpus(str(tmp_path / "corpus"), 3000, 5)
    pipeline = str(tmp_path / "corpus" / "pipeline.toml")
    Converter(load_pipeline(pipeline, str(tmp_path / "local")), ConvertOptions(workers=2)).run()

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    temp = tempfile.mkdtemp(prefix="rc", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    monkeypatch.setenv("RAY_TMPDIR", temp)  # every node's session folder (and Ray's address file) in it
    os.makedirs(os.path.join(temp, "ray"))
    # the head takes no work: tasks go to the two worker nodes, one CPU (one actor) each
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "temp_dir": os.path.join(temp, "ray"),
                                                            "object_store_memory": 80 * 2**20})
    for _ in range(2):
        cluster.add_node(num_cpus=1, object_store_memory=80 * 2**20)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        config = load_pipeline(pipeline, str(tmp_path / "ray"))
        ray_engine.TASKS_PER_NODE.clear()
        Converter(config, ConvertOptions(workers=2, engine="ray", ray_address=cluster.address)).run()
        spread = dict(ray_engine.TASKS_PER_NODE)  # every piece of both phases of every split
        workers = {node["NodeID"] for node in ray.nodes() if node["Resources"].get("CPU", 0) > 0}
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
    assert shard_files(tmp_path / "ray") == shard_files(tmp_path / "local")
    assert set(spread) == workers and len(workers) == 2  # both worker nodes worked, the head none
    assert all(count < sum(spread.values()) for count in spread.values())  # no node saw every piece
