"""A test environment that makes any model take turns: every segment is a complete call, answered by a fixed
observation. Shared by the episode tests on every engine (hf, the openai engine, vLLM in its own environment)."""
from reasoning_rl.rollout.environments import Environment, Step


class EveryTurnIsACall(Environment):
    """Every segment is a complete call; the observation is a fixed text. Makes a random model take turns."""
    name = "every-turn"
    OBS = "\n[result: 17]\n"

    def call_end(self, text):
        return len(text) if text else None

    def respond(self, states, segments):
        return [Step(observation=self.OBS, tool_call=True, call=s) for s in segments]
