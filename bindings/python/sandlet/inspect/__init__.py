"""sandlet as an Inspect AI sandbox provider (``pip install 'sandlet[inspect]'``).

Registered under the name ``sandlet`` through Inspect's entry point, so a task needs no import::

    inspect eval task.py --sandbox sandlet:sandlet.yaml

or, in the task, ``sandbox=("sandlet", "sandlet.yaml")`` or ``sandbox=SandboxEnvironmentSpec("sandlet",
SandletSandboxConfig(environment="swe-task"))``. The config names where the root filesystem comes from —
``environment`` (a sandlet environment or imported OCI image), ``layers``, or ``recipe`` (a Dockerfile
subset, built once per task by ``sandlet build``) — plus ``user``, ``workdir``, ``env``, limits (``cpus``,
``memory``, ``pids``, ``disk``) and ``network`` ("none" or an allow-list policy). A compose file (subset:
image, build, user, working_dir, environment, limits, ``network_mode: none``) maps each service to a sandbox.
The runtime root is ``root`` in the config, else $SANDLET_ROOT. See docs/INTEGRATIONS.md.
"""
from ._config import SandletSandboxConfig, SandletServiceConfig, load_config
from ._environment import SandletSandboxEnvironment

__all__ = ["SandletSandboxEnvironment", "SandletSandboxConfig", "SandletServiceConfig", "load_config"]
