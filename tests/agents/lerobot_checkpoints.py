"""LeRobot policies with random weights, built here and saved as a training run saves them (policy, processors)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
from lerobot.policies.factory import make_pre_post_processors

PUSHT_INPUTS = {"observation.image": (3, 96, 96), "observation.state": (2,)}
LIBERO_INPUTS = {"observation.images.image": (3, 32, 32), "observation.images.image2": (3, 32, 32),
                 "observation.state": (8,)}  # fmt: skip


def _features(inputs: dict[str, tuple[int, ...]], action: int) -> dict[str, Any]:
    visual = {name: PolicyFeature(FeatureType.VISUAL, shape) for name, shape in inputs.items() if len(shape) == 3}
    states = {name: PolicyFeature(FeatureType.STATE, shape) for name, shape in inputs.items() if len(shape) == 1}
    return {"input_features": {**visual, **states},
            "output_features": {"action": PolicyFeature(FeatureType.ACTION, (action,))}}  # fmt: skip


def _stats(inputs: dict[str, tuple[int, ...]], action: int, scale: float) -> dict[str, dict[str, torch.Tensor]]:
    stats: dict[str, dict[str, torch.Tensor]] = {}
    for name, shape in {**inputs, "action": (action,)}.items():
        size = (shape[0], 1, 1) if len(shape) == 3 else shape
        half = torch.full(size, 0.5) if len(shape) == 3 else torch.full(size, scale / 2)
        stats[name] = {"mean": half, "std": half / 2, "min": torch.zeros(size), "max": half * 2}
    return stats


def save_act(directory: Path, inputs: dict[str, tuple[int, ...]], action: int, scale: float = 512.0) -> Path:
    torch.manual_seed(0)
    config = ACTConfig(**_features(inputs, action), pretrained_backbone_weights=None, device="cpu", chunk_size=10,
                       n_action_steps=4, dim_model=32, n_heads=2, dim_feedforward=64, n_encoder_layers=1,
                       n_decoder_layers=1, vision_backbone="resnet18")  # fmt: skip
    return _save(directory, ACTPolicy(config), config, _stats(inputs, action, scale))


def save_diffusion(directory: Path, inputs: dict[str, tuple[int, ...]], action: int, scale: float = 512.0) -> Path:
    torch.manual_seed(0)
    config = DiffusionConfig(**_features(inputs, action), pretrained_backbone_weights=None, device="cpu",
                             n_obs_steps=2, horizon=8, n_action_steps=4, down_dims=(16, 32),
                             diffusion_step_embed_dim=16, num_inference_steps=3, crop_shape=None,
                             use_group_norm=False, spatial_softmax_num_keypoints=8)  # fmt: skip
    return _save(directory, DiffusionPolicy(config), config, _stats(inputs, action, scale))


def _save(directory: Path, policy: Any, config: Any, stats: dict[str, dict[str, torch.Tensor]]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    pre, post = make_pre_post_processors(config, dataset_stats=stats)
    policy.save_pretrained(directory)
    pre.save_pretrained(directory)
    post.save_pretrained(directory)
    return directory
