"""Tasks as gold paths: the screens an expert walks through, what it does on each, and why.

A `Task` is the unit of InquireBench: an instruction, the user's hidden intent (revealed only when
the agent asks), and the expert's path of `Step`s. The environment (`env.py`) follows the path,
lets an agent stray into detours and come back, and judges the outcome from the effects the agent
caused, never from the path itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..agent.actions import Action
from ..agent.questions import Need
from ..agent.taxonomy import SAFE, category_of, describe
from .apps import Screen, centre, home_screen


@dataclass(frozen=True)
class Inquiry:
    question: str
    reply: str  # what the simulated user answers
    reason: str  # why asking is required (the sub-category's description, made specific)
    # what a question must name to be answered (`agent.questions`); drawn from values the task holds already,
    # so it stays out of the repr that pins the generated splits (tests/test_world.py)
    need: Need | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Step:
    screen: Screen
    action: Action  # gold, screen frame
    think: str
    target: str | None = None  # element id the gold action clicks
    inquiry: Inquiry | None = None  # set on the call_user steps where asking is required
    effect: str | None = None  # what executing the gold action changes in the world
    # element ids that, clicked at an inquiry step, mean acting without asking (unsafe)
    candidates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    task_id: str
    app: str
    subcategory: str
    template: str
    instruction: str
    intent: str  # the user's true intent
    steps: tuple[Step, ...]
    slots: dict = field(default_factory=dict, hash=False, compare=False)

    @property
    def category(self) -> str:
        return category_of(self.subcategory)

    @property
    def inquiry_required(self) -> bool:
        return any(s.inquiry for s in self.steps)

    @property
    def goal_effects(self) -> tuple[str, ...]:
        return tuple(s.effect for s in self.steps if s.effect)


def _not_needed(why: str) -> str:
    return f"Inquiry check: not needed, because {why}."


class Flow:
    """A small builder: each method appends one expert step; `task()` seals the path."""

    def __init__(self, app: str, subcategory: str, instruction: str, intent: str | None = None):
        self.app, self.subcategory, self.instruction = app, subcategory, instruction
        self.intent = intent or instruction
        self.steps: list[Step] = []
        self._confirmed = ""  # set after the user answered, so later thinks can say so

    def _safe_reason(self, default: str) -> str:
        return self._confirmed or default

    def open(self, app: str | None = None) -> "Flow":
        app = app or self.app
        think = f"Home screen. The task needs the {app} app. {_not_needed('opening an app changes nothing')}"
        self.steps.append(Step(home_screen(), Action("open", text=app), think))
        return self

    def tap(
        self,
        screen: Screen,
        text: str,
        need: str,
        effect: str | None = None,
        why: str = "this step is safe and fully specified",
    ) -> "Flow":
        el = next((e for e in screen.elements if e.text == text and e.clickable), None)
        if el is None:
            raise ValueError(f"{screen.title}: no element {text!r} in {[e.text for e in screen.elements]}")
        think = (
            f"{screen.app} / {screen.title}. Next: {need}. Target: {el.text} <{el.id}>. "
            f"{_not_needed(self._safe_reason(why))}"
        )
        self.steps.append(Step(screen, Action("click", coordinate=centre(el.bbox)), think, target=el.id, effect=effect))
        return self

    def type(self, screen: Screen, text: str, need: str, effect: str | None = None) -> "Flow":
        think = (
            f"{screen.app} / {screen.title}. Next: {need}. Type: {text}. "
            f"{_not_needed(self._safe_reason('typing into this field is safe'))}"
        )
        self.steps.append(Step(screen, Action("type", text=text), think, effect=effect))
        return self

    def ask(
        self,
        screen: Screen,
        question: str,
        reply: str,
        why: str,
        candidates: tuple[str, ...] = (),
        about: tuple[str, ...] = (),
    ) -> "Flow":
        """An inquiry step; `candidates` are the element texts that acting without asking would click, and
        the user chooses between them; `about` are the slot values a question must name to be answered."""
        cand_ids = tuple(screen.find(t).id for t in candidates)
        sub = self.subcategory
        reason = f"{why} ({category_of(sub)}/{sub})"
        think = f"{screen.app} / {screen.title}. {why[0].upper() + why[1:]}. Inquiry check: needed, because {describe(sub)}."
        self.steps.append(
            Step(
                screen,
                Action("call_user", text=question),
                think,
                inquiry=Inquiry(question, reply, reason, Need(tuple(about), tuple(candidates))),
                candidates=cand_ids,
            )
        )
        self._confirmed = f"the user answered: {reply.rstrip('.')}"
        return self

    def done(
        self,
        screen: Screen,
        status: str = "success",
        note: str = "the task is complete",
        candidates: tuple[str, ...] = (),
    ) -> "Flow":
        """Terminate; `candidates` (element ids) are what clicking now would do against the user's answer."""
        think = f"{screen.app} / {screen.title}. {note[0].upper() + note[1:]}. {_not_needed('nothing is left to do')}"
        self.steps.append(Step(screen, Action("terminate", status=status), think, candidates=candidates))
        return self

    def task(self, task_id: str, template: str, slots: dict) -> Task:
        if self.subcategory != SAFE and not any(s.inquiry for s in self.steps):
            raise ValueError(f"{template}: an inquiry sub-category needs an ask() step")
        return Task(
            task_id, self.app, self.subcategory, template, self.instruction, self.intent, tuple(self.steps), slots
        )


def strip_inquiries(task: Task) -> Task:
    """The same task with every inquiry step removed (the 'always-act' reference policy's path)."""
    return replace(task, steps=tuple(s for s in task.steps if s.inquiry is None))
