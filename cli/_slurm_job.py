"""What runs inside a Slurm job of ``orthotune slurm``: the batch script and the wait for the
job's Ray nodes (``python -m orthotune.cli._slurm_job wait-for-nodes ADDRESS COUNT SECONDS``).

The script starts one Ray node per Slurm node with Ray's own ``ray start --block`` as one
Slurm step each (``srun``): the head on the allocation's first node, which runs the batch
script and the search's driver, then the others, each with the CPUs Slurm gave the job on
that node and ``--gpus-per-node`` GPUs. It waits until every node has joined, runs
``orthotune launch --start-or-resume`` against that cluster, and stops the Ray steps at the
end. Ray's ``ray symmetric-run`` (Ray 2.60) is not used: it stops Ray with ``ray stop``,
which ends every Ray process on the node by name (other jobs' too), only after its command
returns normally (not on SIGTERM), and it tells the head from the workers by comparing the
node's addresses with ``--address`` (every node of a one-host test cluster would be a head).
A ``ray start --block`` step stops its own node's processes when Slurm ends the step.

Signals: Slurm sends SIGUSR2 to the script ``--signal=B:USR2@SECONDS`` before the time
limit; the script hands SIGTERM to the driver, which stops the search with its finished
trials stored (exit 143), stops Ray and requeues the job (``scontrol requeue``), which
continues the search from the store. ``scancel`` and preemption send SIGTERM to every
process of the job (the driver included): the search stops the same way and the job ends
(a preempted ``--requeue`` job is requeued by Slurm itself).
"""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

#: The signal Slurm sends the batch shell before the time limit (SIGUSR1 is Ray Tune's own
#: graceful stop, which would record the search finished: never sent to the driver).
WARNING_SIGNAL = "USR2"
#: How often the node count is read while the script waits for its nodes.
POLL_S = 2.0


@dataclass(frozen=True)
class BatchJob:
    """One batch script: the allocation it asks Slurm for and the search it runs."""

    name: str  # the search's name (the job's is orthotune-NAME)
    nodes: int
    launch: Sequence[str]  # the driver's arguments after ``python -m orthotune.cli``
    python: str  # this orthotune's interpreter, the same path on every node
    ray: str  # Ray's command of that environment
    output: str  # Slurm's log file (%j: the job id)
    stop_before_s: int  # the time-limit warning's lead
    cpus_per_node: int | None = None  # None: whole nodes (--exclusive)
    gpus_per_node: int = 0
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    extra: Sequence[str] = ()  # further sbatch options, each one #SBATCH line
    env: Mapping[str, str] = field(default_factory=dict)  # exported before anything runs
    node_wait_s: int = 600
    written_by: str = ""  # the command that wrote the script, for its header

    def directives(self) -> list[str]:
        """The ``#SBATCH`` lines."""
        wanted = [f"--job-name=orthotune-{self.name}", f"--nodes={self.nodes}", "--ntasks-per-node=1",
                  f"--cpus-per-task={self.cpus_per_node}" if self.cpus_per_node else "--exclusive"]
        wanted += [f"--gpus-per-node={self.gpus_per_node}"] if self.gpus_per_node else []
        wanted += [f"--{key}={value}" for key, value in (("time", self.time), ("partition", self.partition),
                                                         ("account", self.account)) if value]
        wanted += ["--requeue", f"--signal=B:{WARNING_SIGNAL}@{self.stop_before_s}", "--open-mode=append",
                   f"--output={self.output}", *self.extra]
        return [f"#SBATCH {option}" for option in wanted]

    def settings(self) -> list[str]:
        """The shell variables the body reads (every value quoted for the shell)."""
        lines = [f"export {key}={shlex.quote(value)}" for key, value in self.env.items()]
        lines += [f"python={shlex.quote(self.python)}", f"ray={shlex.quote(self.ray)}",
                  f"gpus_per_node={self.gpus_per_node}", f"node_wait_s={self.node_wait_s}",
                  f"launch=({shlex.join(self.launch)})"]
        return lines

    def script(self) -> str:
        header = ["#!/bin/bash", f"# orthotune search {self.name} on a Slurm allocation, written by:",
                  f"#   {self.written_by}", "# Submit it with sbatch; a requeued or resubmitted job continues the "
                  "search from its store (orthotune launch --start-or-resume)."]
        return "\n".join([*header, *self.directives(), "", *self.settings(), BODY])


#: The script after its settings: constant, so every line of it is reviewed once (tests run
#: it on a real Slurm).
BODY = r"""
set -u
# -- one Ray cluster for this job -----------------------------------------------------------
# Ray's token authentication with a token of the job's own (Ray refuses nodes, drivers and
# `ray status` without it), ports and a temporary folder of its own: jobs sharing a node never
# meet. A one-node job keeps Ray on loopback (Ray's single-node mode keeps 127.0.0.1).
export RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0
RAY_AUTH_TOKEN=$("$python" -c 'import secrets; print(secrets.token_hex(32))') || exit 1
export RAY_AUTH_TOKEN
temp=/tmp/ray-$SLURM_JOB_ID-${SLURM_RESTART_COUNT:-0}
mapfile -t nodes < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
cpus=()  # the CPUs Slurm gave the job on each node, in node order: "4(x2),8" is 4 4 8
IFS=, read -ra counts <<< "$SLURM_JOB_CPUS_PER_NODE"
for count in "${counts[@]}"; do
  times=1
  if [[ $count == *"(x"* ]]; then times=${count#*(x}; times=${times%)}; fi
  for ((i = 0; i < times; i++)); do cpus+=("${count%%(*}"); done
done
steps=() driver="" stopping=0 requeue=0
free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
ray_node() {  # NODE CPUS RAY-START-OPTIONS...: `ray start --block` on NODE, one Slurm step
  local node=$1 count=$2; shift 2
  srun --nodes=1 --ntasks=1 --cpus-per-task="$count" --nodelist="$node" "$ray" start --block \
    --num-cpus="$count" --num-gpus="$gpus_per_node" --temp-dir="$temp" --dashboard-agent-listen-port=0 \
    --disable-usage-stats --log-color=false "$@" &
  steps+=($!)
}
stop_ray() {  # srun ends its step when signalled: Slurm stops the step's processes
  if [ ${#steps[@]} -gt 0 ]; then
    echo "orthotune slurm: stopping Ray (srun then reports its steps cancelled and their tasks killed)"
    kill "${steps[@]}" 2>/dev/null; wait "${steps[@]}" 2>/dev/null
  fi
  rm -rf "$temp"
}
finish() {  # STATUS: stop Ray; after the time-limit warning, requeue the job to continue
  stop_ray
  if [ "$requeue" = 1 ] && [ "$1" = 143 ]; then
    echo "orthotune slurm: requeueing job $SLURM_JOB_ID: it continues the search once Slurm starts it again"
    scontrol requeue "$SLURM_JOB_ID"
  fi
  exit "$1"
}
on_time_limit() {  # --signal=B:USR2@...: Slurm's warning reaches this shell only
  echo "orthotune slurm: the job's time limit is near: the search stops, its finished trials kept"
  stopping=1 requeue=1
  if [ -n "$driver" ]; then kill -TERM "$driver" 2>/dev/null; fi
}
# scancel and preemption send SIGTERM to every process of the job: the driver stops itself
trap on_time_limit USR2
trap 'stopping=1' TERM INT

rm -rf "$temp"  # a folder an earlier run of this job id left behind holds a dead head's address
port=$(free_port) client_port=$(free_port)
if [ "${#nodes[@]}" -eq 1 ]; then
  export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
  ray_node "${nodes[0]}" "${cpus[0]}" --head --port="$port" --ray-client-server-port="$client_port" \
    --include-dashboard=false --node-ip-address=127.0.0.1
else
  ray_node "${nodes[0]}" "${cpus[0]}" --head --port="$port" --ray-client-server-port="$client_port" \
    --include-dashboard=false
fi
# the head writes its address in its temporary folder once it is up
for ((waited = 0; waited < node_wait_s; waited++)); do
  if [ -s "$temp/ray_current_cluster" ] || [ "$stopping" = 1 ] || ! kill -0 "${steps[0]}" 2>/dev/null; then break; fi
  sleep 1
done
if [ "$stopping" = 1 ]; then finish 143; fi
if [ ! -s "$temp/ray_current_cluster" ]; then
  echo "orthotune slurm: error: the Ray head on ${nodes[0]} did not start (its output is above)" >&2
  finish 1
fi
address=$(cat "$temp/ray_current_cluster")
for ((i = 1; i < ${#nodes[@]}; i++)); do ray_node "${nodes[i]}" "${cpus[i]}" --address="$address"; done
if [ "${#nodes[@]}" -gt 1 ]; then
  "$python" -m orthotune.cli._slurm_job wait-for-nodes "$address" "${#nodes[@]}" "$node_wait_s" || finish 1
fi
if [ "$stopping" = 1 ]; then finish 143; fi

# -- the search: started, or continued from the store -------------------------------------
"$python" -m orthotune.cli "${launch[@]}" --address "$address" &
driver=$!
if [ "$stopping" = 1 ]; then kill -TERM "$driver" 2>/dev/null; fi
while kill -0 "$driver" 2>/dev/null; do wait "$driver"; done  # a trap ends a wait early
wait "$driver"
finish $?
"""


def wait_for_nodes(address: str, count: int, wait_s: float) -> int:
    """Exit status 0 once the Ray cluster at ``address`` has ``count`` live nodes; 1 with one
    line on stderr if it has fewer after ``wait_s`` seconds."""
    import ray

    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + wait_s
    alive = 0
    while time.monotonic() < deadline:
        alive = sum(1 for node in ray.nodes() if node["Alive"])
        if alive >= count:
            print(f"orthotune slurm: all {count} Ray nodes joined")
            return 0
        time.sleep(POLL_S)
    print(f"orthotune slurm: error: {alive} of {count} Ray nodes joined in {wait_s:g} s (each node's `ray start` "
          f"output is in the job's log)", file=sys.stderr)
    return 1


def main(argv: Sequence[str]) -> int:
    if len(argv) != 4 or argv[0] != "wait-for-nodes":
        print("usage: python -m orthotune.cli._slurm_job wait-for-nodes ADDRESS COUNT SECONDS", file=sys.stderr)
        return 2
    return wait_for_nodes(argv[1], int(argv[2]), float(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
