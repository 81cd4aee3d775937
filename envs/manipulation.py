"""Robot manipulation from pixels and language: MetaWorld v3 tasks.

Each task is a MetaWorld v3 environment seen through a fixed camera as an RGB
frame (64x64 by default) plus proprioception (the hand's position and the
gripper's opening, ``state[:4]`` of MetaWorld's observation), with a language
instruction drawn from the task's templates. Actions are 4-D in [-1, 1]
(hand displacement and gripper effort); success is MetaWorld's own.

Frames come from a ``mujoco.Renderer`` with shadows, reflections and
multisampling off (the gym ``render()`` path is about 15x slower). The corner
cameras render upside down; frames from them are flipped.

Demonstrations come from MetaWorld's scripted experts
(``metaworld.policies.ENV_POLICY_MAP``), with Gaussian action noise for graded
quality (``LEVELS``).

MetaWorld 3.1.1 pins MuJoCo 3.3.0; Reverie pins 4.0.0 (its locomotion datasets
and zoo were made with it) and installs MetaWorld without its dependencies.
MuJoCo 4 widened a weld constraint's ``eq_data`` from 11 to 12 numbers, which
MetaWorld's mocap reset writes whole; :func:`_patch_metaworld_for_mujoco4`
writes the first 11 (the 12th keeps its compiled value) and is the only change.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from envs.errors import ReverieError

os.environ.setdefault("MUJOCO_GL", "egl")

PROPRIO_DIM = 4
ACT_DIM = 4
OBJECT_DIM = 6            # privileged: the task's (first) object position and its goal position, from MetaWorld's state
SCENES_PER_LIST = 50      # the task variations in one MetaWorld MT1 list
SCENE_RULES = 2           # what a reset seed means; bump on change (2: variation seed % 50 of MT1 list seed // 50)


@dataclass(frozen=True)
class ManipulationTask:
    name: str                        # reverie name: metaworld-<task>
    env_name: str                    # MetaWorld v3 name
    instructions: tuple[str, ...]    # templates for training
    held_out: tuple[str, ...]        # templates kept for testing generalisation
    max_episode_steps: int = 150     # the scripted experts succeed in about 60-110 steps
    success_body: str = "object"     # what MetaWorld's success measures against the goal: the first object
                                     # (a puck, a handle, a button) or the hand (reach)

    def templates(self, split: str = "train") -> tuple[str, ...]:
        if split == "train":
            return self.instructions
        if split == "test":
            return self.held_out
        if split == "all":
            return self.instructions + self.held_out
        raise ReverieError(f"instruction split: expected train, test or all, got '{split}'")


def _task(short: str, train: tuple[str, ...], test: tuple[str, ...], **more) -> ManipulationTask:
    return ManipulationTask(f"metaworld-{short}", f"{short}-v3", train, test, **more)


TASKS: dict[str, ManipulationTask] = {t.name: t for t in [
    _task("reach", ("reach the red target", "move the gripper to the target", "put your hand on the goal point"),
          ("bring the hand to the target position",), success_body="hand"),
    _task("push", ("push the puck to the goal", "slide the block to the green target",
                   "move the puck along the table to the goal"), ("shove the puck onto the target",)),
    _task("pick-place", ("pick up the puck and place it at the goal", "grasp the object and put it on the target",
                         "lift the puck and move it to the goal"), ("carry the puck to the target and let go",)),
    _task("drawer-open", ("open the drawer", "pull the drawer out", "slide the drawer open"),
          ("pull the drawer handle toward you",)),
    _task("drawer-close", ("close the drawer", "push the drawer shut", "slide the drawer closed"),
          ("push the open drawer back in",)),
    _task("door-open", ("open the door", "swing the door open", "pull the door open by its handle"),
          ("rotate the door away from its frame",)),
    _task("window-open", ("open the window", "slide the window open", "push the window sash to the side"),
          ("move the window pane to open it",)),
    _task("button-press-topdown", ("press the button from the top", "push the button down",
                                   "press down on the button"), ("hit the button from above",)),
]}

# Action noise of the scripted expert per dataset level (std of Gaussian noise; None: uniform random actions).
LEVELS: dict[str, float | None] = {"expert": 0.0, "medium": 0.5, "poor": 1.0, "misdirected": 0.0, "random": None}
# misdirected: the expert's actions from another scene replayed in this one -- the arm moves with purpose and mostly
# misses, the counter-examples a world model needs to learn that the object moves only when the arm reaches it
MISDIRECT_OFFSET = 50_000      # the scene whose expert actions a misdirected episode replays: its own seed + this


def get_manipulation_task(name: str) -> ManipulationTask:
    if name not in TASKS:
        raise ReverieError(f"unknown manipulation task '{name}': expected one of {', '.join(TASKS)}")
    return TASKS[name]


def instruction(task: ManipulationTask, rng: np.random.Generator, split: str = "train") -> str:
    options = task.templates(split)
    return options[int(rng.integers(len(options)))]


def check_instruction(task: ManipulationTask, text: str) -> str:
    """An instruction must be one of the task's templates (a trained model knows no other words)."""
    if text not in task.templates("all"):
        raise ReverieError(f"instruction '{text}': not a template of {task.name}; expected one of: "
                           + "; ".join(task.templates("all")))
    return text


_PATCHED = False


def _patch_metaworld_for_mujoco4() -> None:
    global _PATCHED
    if _PATCHED:
        return
    import mujoco
    import metaworld.sawyer_xyz_env as sawyer

    weld = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0]

    def reset_mocap_welds(self) -> None:
        if self.model.nmocap > 0 and self.model.eq_data is not None:
            for i in range(self.model.eq_data.shape[0]):
                if self.model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
                    self.model.eq_data[i, :len(weld)] = weld

    sawyer.SawyerMocapBase.reset_mocap_welds = reset_mocap_welds
    _PATCHED = True


@dataclass
class FrameRenderer:
    """A fast offscreen renderer of one camera: shadows, reflections and multisampling off."""

    model: object
    size: int = 64
    camera: str = "corner"
    _renderer: object = field(default=None, repr=False)

    def __post_init__(self):
        import mujoco

        self.model.vis.quality.offsamples = 0
        self._renderer = mujoco.Renderer(self.model, self.size, self.size)
        flags = self._renderer.scene.flags
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self.flip = self.camera.startswith("corner")       # MetaWorld's corner cameras are upside down

    def __call__(self, data) -> np.ndarray:
        self._renderer.update_scene(data, camera=self.camera)
        frame = self._renderer.render()
        return np.ascontiguousarray(frame[::-1]) if self.flip else frame

    def close(self) -> None:
        self._renderer.close()


class ManipulationEnv:
    """One MetaWorld task: ``reset(seed) -> obs``, ``step(action) -> obs, reward, terminated, truncated, info``
    with ``obs = {"image": uint8 [S, S, 3], "state": float32 [4]}``; ``info["success"]`` is MetaWorld's."""

    def __init__(self, task: str | ManipulationTask, image_size: int = 64, camera: str = "corner",
                 max_episode_steps: int | None = None):
        _patch_metaworld_for_mujoco4()
        import gymnasium as gym
        import metaworld  # noqa: F401  (registers the Meta-World/* environments)

        self.task = task if isinstance(task, ManipulationTask) else get_manipulation_task(task)
        self.max_episode_steps = max_episode_steps or self.task.max_episode_steps
        self._env = gym.make("Meta-World/MT1", env_name=self.task.env_name, disable_env_checker=True)
        self._unwrapped = self._env.unwrapped
        # MT1 draws one of its 50 task variations (object and goal placements) from the wrapper's own
        # generator before the seeded reset, from a list it draws afresh, unseeded, for every instance;
        # Reverie chooses the variation from the reset seed instead (``scene``), so that a seed is the same
        # scene in every instance and process; and success ends nothing here (the caller's rules do).
        self._scene_lists: dict[int, list] = {}
        self._env.get_wrapper_attr("toggle_sample_tasks_on_reset")(False)
        self._env.get_wrapper_attr("toggle_terminate_on_success")(False)
        self._unwrapped.max_path_length = max(self._unwrapped.max_path_length, self.max_episode_steps + 1)
        self.render_frame = FrameRenderer(self._unwrapped.model, image_size, camera)
        self.full_state: np.ndarray | None = None     # MetaWorld's 39-dim state (the scripted expert reads it)
        self.t = 0

    def _obs(self, state: np.ndarray) -> dict:
        self.full_state = state
        return {"image": self.render_frame(self._unwrapped.data), "state": state[:PROPRIO_DIM].astype(np.float32)}

    def scene(self, seed: int):
        """The MetaWorld task variation of reset ``seed``: variation ``seed % 50`` of the MT1 list drawn with
        seed ``seed // 50``. Every seed is its own scene (MetaWorld makes a list's 50 placements distinct),
        and the same one wherever it is asked for."""
        import metaworld

        if int(seed) < 0:
            raise ReverieError(f"seed: expected a reset seed >= 0, got {seed}")
        block, index = divmod(int(seed), SCENES_PER_LIST)
        if block not in self._scene_lists:
            self._scene_lists[block] = metaworld.MT1(self.task.env_name, seed=block).train_tasks
        return self._scene_lists[block][index]

    def reset(self, seed: int) -> dict:
        self._unwrapped.set_task(self.scene(seed))
        state, _ = self._env.reset(seed=int(seed))
        self.t = 0
        return self._obs(state)

    def step(self, action: np.ndarray):
        action = np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
        if action.shape != (ACT_DIM,):
            raise ValueError(f"action: expected shape ({ACT_DIM},), got {action.shape}")
        state, reward, terminated, _, info = self._env.step(action)
        self.t += 1
        truncated = self.t >= self.max_episode_steps
        return self._obs(state), float(reward), bool(terminated), truncated, {"success": bool(info["success"])}

    def objects(self) -> np.ndarray:
        """The simulator's object and goal positions now (``OBJECT_DIM``, float32): the first object's xyz and the
        goal's xyz from MetaWorld's 39-dim state. Privileged: never shown to a policy; datasets keep it so that a
        world model may learn where things are from it."""
        s = self.full_state
        return np.concatenate([s[4:7], s[36:39]]).astype(np.float32)

    def expert(self):
        from metaworld.policies import ENV_POLICY_MAP

        return ENV_POLICY_MAP[self.task.env_name]()

    def close(self) -> None:
        self.render_frame.close()
        self._env.close()
