"""A synthetic text-to-video pipeline written the usual way (the LL001 benchmark's "before").

Text encoder -> denoise loop with classifier-free guidance and a diffusers-style step callback
(`locals()[k]`) -> VAE-like decode with large activations. `lifetime-lint --fix` turns this
file into the "after" version (see benchmarks/ll001_pipeline.py prepare).
"""

import torch
from torch import nn


class TextEncoder(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids):
        return self.proj(self.embed(ids))


class Denoiser(nn.Module):
    def __init__(self, channels, dim):
        super().__init__()
        self.context = nn.Linear(dim, channels)
        self.mix = nn.Conv3d(channels, channels, 3, padding=1)

    def forward(self, latents, t, encoder_hidden_states):
        context = self.context(encoder_hidden_states.mean(dim=1))
        return self.mix(latents) * (1.0 - t) + context[:, :, None, None, None]


class VideoDecoder(nn.Module):
    def __init__(self, channels, hidden, scale):
        super().__init__()
        self.conv_in = nn.Conv3d(channels, hidden, 3, padding=1)
        self.up = nn.Upsample(scale_factor=(1, scale, scale), mode="nearest")
        self.conv_out = nn.Conv3d(hidden, 3, 3, padding=1)

    def decode(self, z):
        hidden = self.conv_in(z)
        hidden = self.up(hidden)
        return self.conv_out(hidden)


class TextToVideoPipeline:
    def __init__(self, text_encoder, transformer, vae):
        self.text_encoder = text_encoder
        self.transformer = transformer
        self.vae = vae

    @torch.no_grad()
    def __call__(
        self,
        prompt_ids,
        negative_ids,
        latents,
        num_inference_steps=10,
        guidance_scale=5.0,
        callback_on_step_end=None,
        callback_on_step_end_tensor_inputs=(),
    ):
        prompt_embeds = self.text_encoder(prompt_ids)
        negative_prompt_embeds = self.text_encoder(negative_ids)
        prompt_embeds = torch.cat([negative_prompt_embeds, prompt_embeds])

        for i in range(num_inference_steps):
            t = 1.0 - i / num_inference_steps
            latent_model_input = torch.cat([latents] * 2)
            noise_pred = self.transformer(
                latent_model_input, t, encoder_hidden_states=prompt_embeds
            )
            noise_pred_uncond, noise_pred_text = noise_pred.chunk(2)
            noise_pred = noise_pred_uncond + guidance_scale * (noise_pred_text - noise_pred_uncond)
            latents = latents - noise_pred / num_inference_steps

            if callback_on_step_end is not None:
                callback_kwargs = {}
                for k in callback_on_step_end_tensor_inputs:
                    callback_kwargs[k] = locals()[k]
                callback_on_step_end(i, callback_kwargs)

        video = self.vae.decode(latents)
        return video
