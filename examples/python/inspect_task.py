"""Inspect tasks on sandlet sandboxes, with Inspect's mock model (no API key, no network): `sandlet_tools` has the
model call the bash(), text_editor() and bash_session() tools to solve a small job in the sandbox, scored in
the sandbox; `sandlet_parallel -T samples=N` runs N samples at once, each calling the same tools from a
solver in a sandbox of its own; `sandlet_hang` starts a command that never ends (interrupt the eval:
nothing is left behind).

    inspect eval inspect_task.py@sandlet_tools --sandbox sandlet:sandlet.yaml

The task names no sandbox provider in code: `--sandbox sandlet:CONFIG` finds the provider through its entry
point, as a user's install does. It never imports sandlet. Run by `make demo` and
test/python/integrations/test_inspect_eval.py.
"""
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver, use_tools
from inspect_ai.tool import bash, bash_session, text_editor
from inspect_ai.util import sandbox

MODEL = "mockllm/model"


def script() -> list:
    call = ModelOutput.for_tool_call
    outputs = [
        # bash(): a one-shot shell command; its user and directory come from the sandbox config.
        call(MODEL, "bash", {"command": "echo 40 > base.txt && id -un && pwd"}),
        # text_editor(): a file created through Inspect's injected tool server.
        call(MODEL, "text_editor", {"command": "create", "path": "/root/add.sh",
                                    "file_text": "echo $(( $(cat /root/base.txt) + 2 ))\n"}),
        # bash_session(): a persistent shell; the variable survives from one call to the next.
        call(MODEL, "bash_session", {"action": "type_submit", "input": "cd /root && STEP=$(sh add.sh)"}),
        call(MODEL, "bash_session", {"action": "type_submit", "input": "echo $STEP > answer.txt && echo saved"}),
        ModelOutput.from_content(MODEL, "The answer is in /root/answer.txt."),
    ]
    for output in outputs:  # (given, so that the mock model does not fetch a tokenizer to count them)
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return outputs


@scorer(metrics=[accuracy()])
def answer_in_sandbox():
    async def score(state: TaskState, target: Target) -> Score:
        result = await sandbox().exec(["cat", "/root/answer.txt"])
        value = result.stdout.strip()
        return Score(value=CORRECT if result.success and value == target.text else INCORRECT, answer=value,
                     explanation=result.stderr)
    return score


@task
def sandlet_tools() -> Task:
    return Task(
        dataset=[Sample(input="Compute base + 2 into /root/answer.txt.", target="42")],
        solver=[use_tools(bash(timeout=60), text_editor(timeout=60), bash_session(timeout=240)), generate()],
        scorer=answer_in_sandbox(),
        model=get_model(MODEL, custom_outputs=script()),
        message_limit=30,
    )


HANG_MARKER = "sandlet-inspect-hang-marker"


@task
def sandlet_hang() -> Task:
    """A sample whose command never ends: the test kills the eval's process meanwhile."""
    outputs = [ModelOutput.for_tool_call(MODEL, "bash", {"command": f"sleep 600; echo {HANG_MARKER}"}),
               ModelOutput.from_content(MODEL, "unreachable")]
    for output in outputs:
        output.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return Task(dataset=[Sample(input="Wait.", target="never")],
                solver=[use_tools(bash(timeout=900)), generate()],
                scorer=answer_in_sandbox(), model=get_model(MODEL, custom_outputs=outputs))


@solver
def square_with_tools():
    """Calls the tools directly (no model: the mock model's script is one sequence shared by every sample)."""
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        n = state.metadata["n"]
        await bash(timeout=60)(command=f"echo {n} > /root/base.txt")
        await text_editor(timeout=60)(command="create", path="/root/square.sh",
                                      file_text="n=$(cat /root/base.txt); echo $((n * n))\n")
        await bash_session(timeout=240)(action="type_submit", input="sh /root/square.sh > /root/answer.txt")
        return state
    return solve


@task
def sandlet_parallel(samples: int = 8) -> Task:
    """`samples` samples at once (run with --max-samples/--max-sandboxes >= samples): parallel starts."""
    return Task(dataset=[Sample(input=f"Square {n}.", target=str(n * n), metadata={"n": n}) for n in range(samples)],
                solver=square_with_tools(), scorer=answer_in_sandbox(), model=get_model(MODEL))
