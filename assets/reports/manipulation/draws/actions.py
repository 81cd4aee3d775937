"""Does the video model follow the actions? One start, several action sequences.

For each of 20 simulator resets of TASK, five 150-step action sequences are played open loop both in
MetaWorld and in the video model (at its mean, from the same first frame): the scripted expert's
actions for that reset; the expert's actions for a different reset (another object and goal
placement); the expert's actions with Gaussian noise of std 1 (clipped); uniform random actions;
and zeros. Printed per sequence: real success, imagined success (the model's success signal above 0.5
for the model's hold of steps in a row; some step for older models), the hand's position error at
steps 25/75/150 (imagined proprioception against the simulator's), the PSNR of the imagined frame
against the real one at those steps, and the model's verdict on the real episode ("verdict/real", same hold:
the judge on the real frames as the model shows them; for success_on=objects the head on the simulator's
positions): where the verdict calls real failures successes, it is at fault; where it does not but imagined
episodes succeed, the dynamics are. A strip of real and imagined frames of the first
reset under each sequence is written beside the log (draws/actions-TASK-<model>-<sequence>.png).

If the model follows the actions, imagined success should track real success across sequences, and
the zero and random sequences should be imagined as failures.

Usage (repository root): python assets/reports/manipulation/draws/actions.py TASK [MODEL]
"""
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from envs.manipulation import PROPRIO_DIM, ManipulationEnv
from eval.metrics import psnr
from eval.video_evaluate import frame_strip
from worldmodels.judge import held
from worldmodels.registry import load_model
from worldmodels.video import frames_to_obs, obs_to_frames

task = sys.argv[1]
here = Path(__file__).parent
model = load_model(Path(sys.argv[2] if len(sys.argv) > 2 else "runs/manip/loop/video.pt"))
H, seeds, checks = 150, list(range(20000, 20020)), (25, 75, 150)
env = ManipulationEnv(f"metaworld-{task}", 64, max_episode_steps=H)


def play(seed: int, actions: np.ndarray | None):
    """Closed-loop expert when ``actions`` is None; else the sequence open loop. Returns actions,
    frames [H+1], proprio [H+1], success (any step)."""
    obs, expert = env.reset(seed), env.expert()
    frames, states, acts, success = [obs["image"]], [obs["state"]], [], False
    objects = [env.objects()]
    for t in range(H):
        a = np.clip(expert.get_action(env.full_state), -1, 1) if actions is None else actions[t]
        obs, _, _, _, info = env.step(a)
        frames.append(obs["image"]); states.append(obs["state"]); acts.append(a); success |= info["success"]
        objects.append(env.objects())
    return np.array(acts, np.float32), np.stack(frames), np.stack(states), success, np.stack(objects)


rng = np.random.default_rng(0)
expert = {s: play(s, None) for s in seeds + [seeds[-1] + 1]}
sequences = {
    "expert": {s: expert[s][0] for s in seeds},
    "expert, other reset": {s: expert[s + 1][0] for s in seeds},
    "expert + noise 1.0": {s: np.clip(expert[s][0] + rng.normal(0, 1, expert[s][0].shape), -1, 1).astype(np.float32)
                           for s in seeds},
    "uniform random": {s: rng.uniform(-1, 1, (H, 4)).astype(np.float32) for s in seeds},
    "zeros": {s: np.zeros((H, 4), np.float32) for s in seeds},
}


g = torch.Generator().manual_seed(0)
hold = model.success_hold()
print(f"{task}: {len(seeds)} resets, {H} steps, model at its mean ({sys.argv[2] if len(sys.argv) > 2 else 'video.pt'}); "
      f"imagined success: the signal past 0.5 for {hold} step(s) in a row")
print(f"{'sequence':22s} real  verdict/real  imagined  agree | hand error (m) @{checks} | PSNR (dB) @{checks}")
for name, acts in sequences.items():
    real_s, imag_s, judged_s, hand_err, psnrs = [], [], [], [], []
    for s in seeds:
        _, frames, states, ok, objects = play(s, acts[s])
        start = frames_to_obs(frames[:1], states[:1])
        state = model.init_state(start, g)
        with torch.no_grad():
            if model.cfg.success_on == "objects":     # the head on the simulator's positions
                judged = model.objects_success(torch.from_numpy(np.concatenate([states, objects], 1)[1:])) > 0.5
            else:                                      # the judge on the real frames as the model shows them
                first = state["first"].expand(H, -1, -1, -1)
                shown = model.reconstruct(obs_to_frames(frames_to_obs(frames[1:], states[1:]), 64), first)
                judged = model.judge.probability(first, shown) > 0.5
        judged_s.append(bool(held(judged.numpy(), hold)))
        hits, errs, ps, strip = [], [], [], [frames[0] / 255.0]
        for t in range(H):
            state, out = model.step(state, torch.from_numpy(acts[s][t:t + 1]), generator=g, deterministic=True)
            hits.append(bool(out.success[0] > 0.5))
            strip.append(out.obs[0, :-PROPRIO_DIM].reshape(64, 64, 3).clamp(0, 1).numpy())
            if t + 1 in checks:
                img = (out.obs[0, :-PROPRIO_DIM].reshape(64, 64, 3).clamp(0, 1).numpy() * 255).astype(np.uint8)
                errs.append(float(np.linalg.norm(out.obs[0, -PROPRIO_DIM:-1].numpy() - states[t + 1][:3])))
                ps.append(float(psnr(img[None] / 255, frames[t + 1][None] / 255)[0]))
        if s == seeds[0]:
            png = here / f"actions-{task}-{Path(sys.argv[2] if len(sys.argv) > 2 else 'video.pt').parent.name}-" \
                f"{name.replace(', ', '-').replace(' ', '-').replace('+', 'plus')}.png"
            png.write_bytes(frame_strip(frames, np.stack(strip), f"{task}, seed {s}, {name}: real (top), imagined"))
        real_s.append(ok); imag_s.append(bool(held(np.array(hits), hold))); hand_err.append(errs); psnrs.append(ps)
    real_s, imag_s, judged_s = np.array(real_s), np.array(imag_s), np.array(judged_s)
    he, pp = np.mean(hand_err, 0), np.mean(psnrs, 0)
    print(f"{name:22s} {real_s.mean():4.0%}  {judged_s.mean():12.0%}  {imag_s.mean():8.0%}  {np.mean(real_s == imag_s):5.0%} | "
          f"{' '.join(f'{x:.3f}' for x in he)} | {' '.join(f'{x:.1f}' for x in pp)}", flush=True)
env.close()
