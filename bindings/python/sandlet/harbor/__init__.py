"""sandlet as a Harbor environment (Terminal-Bench's harness): ``harbor run --env
sandlet.harbor:SandletEnvironment -p TASKS -a AGENT``. A task's ``docker_image`` names a sandlet environment (an
imported image or ``sandlet env create``); a task with ``environment/Dockerfile`` is built with ``sandlet build``
(offline: an instruction it cannot honour is refused, named). Harbor needs Python >= 3.12: the sandlet package
built for that interpreter (``make build`` builds one where the machine has it). docs/INTEGRATIONS.md."""
from ._environment import SandletEnvironment

__all__ = ["SandletEnvironment"]
