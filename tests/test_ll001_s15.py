"""LL001: an activation in a module of a speech/audio package is small, even where the
module's own folder and file name say nothing (StyleTTS2's `Utils/JDC/model.py`, a pitch
extractor over an 80-bin mel)."""

from __future__ import annotations

from pathlib import Path

from lifetime_lint.api import check_text
from lifetime_lint.config import Settings
from lifetime_lint.project import top_package

# StyleTTS2's JDCNet (Utils/JDC/model.py, its forward and ResBlock): a stack of residual
# blocks over a mel spectrogram, each block's input alive across the next block.
PITCH_EXTRACTOR = '''\
import torch
from torch import nn

class JDCNet(nn.Module):
    """
    Joint Detection and Classification Network model for singing voice melody.
    """
    def __init__(self, num_class=722, seq_len=31, leaky_relu_slope=0.01):
        super().__init__()
        self.num_class = num_class

        # input = (b, 1, 31, 513), b = batch size
        self.conv_block = nn.Sequential(
            nn.Conv2d(in_channels=1, out_channels=64, kernel_size=3, padding=1, bias=False),  # out: (b, 64, 31, 513)
            nn.BatchNorm2d(num_features=64),
            nn.LeakyReLU(leaky_relu_slope, inplace=True),
            nn.Conv2d(64, 64, 3, padding=1, bias=False),  # (b, 64, 31, 513)
        )

        # res blocks
        self.res_block1 = ResBlock(in_channels=64, out_channels=128)  # (b, 128, 31, 128)
        self.res_block2 = ResBlock(in_channels=128, out_channels=192)  # (b, 192, 31, 32)
        self.res_block3 = ResBlock(in_channels=192, out_channels=256)  # (b, 256, 31, 8)

        # pool block
        self.pool_block = nn.Sequential(
            nn.BatchNorm2d(num_features=256),
            nn.LeakyReLU(leaky_relu_slope, inplace=True),
            nn.MaxPool2d(kernel_size=(1, 4)),  # (b, 256, 31, 2)
            nn.Dropout(p=0.2),
        )

        # maxpool layers (for auxiliary network inputs)
        # in = (b, 128, 31, 513) from conv_block, out = (b, 128, 31, 2)
        self.maxpool1 = nn.MaxPool2d(kernel_size=(1, 40))
        # in = (b, 128, 31, 128) from res_block1, out = (b, 128, 31, 2)
        self.maxpool2 = nn.MaxPool2d(kernel_size=(1, 20))
        # in = (b, 128, 31, 32) from res_block2, out = (b, 128, 31, 2)
        self.maxpool3 = nn.MaxPool2d(kernel_size=(1, 10))

        # in = (b, 640, 31, 2), out = (b, 256, 31, 2)
        self.detector_conv = nn.Sequential(
            nn.Conv2d(640, 256, 1, bias=False),
            nn.BatchNorm2d(256),
            nn.LeakyReLU(leaky_relu_slope, inplace=True),
            nn.Dropout(p=0.2),
        )

        # input: (b, 31, 512) - resized from (b, 256, 31, 2)
        self.bilstm_classifier = nn.LSTM(
            input_size=512, hidden_size=256,
            batch_first=True, bidirectional=True)  # (b, 31, 512)

        # input: (b, 31, 512) - resized from (b, 256, 31, 2)
        self.bilstm_detector = nn.LSTM(
            input_size=512, hidden_size=256,
            batch_first=True, bidirectional=True)  # (b, 31, 512)

        # input: (b * 31, 512)
        self.classifier = nn.Linear(in_features=512, out_features=self.num_class)  # (b * 31, num_class)

        # input: (b * 31, 512)
        self.detector = nn.Linear(in_features=512, out_features=2)  # (b * 31, 2) - binary classifier

        # initialize weights
        self.apply(self.init_weights)
        return self.pool_block[2](poolblock_out)

    def forward(self, x):
        """
        Returns:
            classification_prediction, detection_prediction
            sizes: (b, 31, 722), (b, 31, 2)
        """
        ###############################
        # forward pass for classifier #
        ###############################
        seq_len = x.shape[-1]
        x = x.float().transpose(-1, -2)

        convblock_out = self.conv_block(x)

        resblock1_out = self.res_block1(convblock_out)
        resblock2_out = self.res_block2(resblock1_out)
        resblock3_out = self.res_block3(resblock2_out)


        poolblock_out = self.pool_block[0](resblock3_out)
        poolblock_out = self.pool_block[1](poolblock_out)
        GAN_feature = poolblock_out.transpose(-1, -2)
        poolblock_out = self.pool_block[2](poolblock_out)

        # (b, 256, 31, 2) => (b, 31, 256, 2) => (b, 31, 512)
        classifier_out = poolblock_out.permute(0, 2, 1, 3).contiguous().view((-1, seq_len, 512))
        classifier_out, _ = self.bilstm_classifier(classifier_out)  # ignore the hidden states

        classifier_out = classifier_out.contiguous().view((-1, 512))  # (b * 31, 512)
        classifier_out = self.classifier(classifier_out)
        classifier_out = classifier_out.view((-1, seq_len, self.num_class))  # (b, 31, num_class)

        # sizes: (b, 31, 722), (b, 31, 2)
        # classifier output consists of predicted pitch classes per frame
        # detector output consists of: (isvoice, notvoice) estimates per frame
        return torch.abs(classifier_out.squeeze()), GAN_feature, poolblock_out

class ResBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, leaky_relu_slope=0.01):
        super().__init__()
        self.downsample = in_channels != out_channels

        # BN / LReLU / MaxPool layer before the conv layer - see Figure 1b in the paper
        self.pre_conv = nn.Sequential(
            nn.BatchNorm2d(num_features=in_channels),
            nn.LeakyReLU(leaky_relu_slope, inplace=True),
            nn.MaxPool2d(kernel_size=(1, 2)),  # apply downsampling on the y axis only
        )

        # conv layers
        self.conv = nn.Sequential(
            nn.Conv2d(in_channels=in_channels, out_channels=out_channels,
                      kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.LeakyReLU(leaky_relu_slope, inplace=True),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
        )

        # 1 x 1 convolution layer to match the feature dimensions
        self.conv1by1 = None
        if self.downsample:
            self.conv1by1 = nn.Conv2d(in_channels, out_channels, 1, bias=False)

    def forward(self, x):
        x = self.pre_conv(x)
        if self.downsample:
            x = self.conv(x) + self.conv1by1(x)
        else:
            x = self.conv(x) + x
        return x
'''


def _package(root: Path, name: str) -> Path:
    module = root / name / "Utils" / "JDC" / "model.py"
    module.parent.mkdir(parents=True)
    for folder in (root / name, root / name / "Utils", module.parent):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    module.write_text(PITCH_EXTRACTOR, encoding="utf-8")
    return module


def _ll001(module: Path) -> list[int]:
    result = check_text(module.read_text(encoding="utf-8"), str(module))
    return [d.start.row for d in result.diagnostics if d.code == "LL001"]


def _ll001_low(module: Path) -> list[tuple[int, str]]:
    """Rows and held-value descriptions at `min-significance = "low"`."""
    settings = Settings()
    settings.extra = {"min-significance": "low"}
    result = check_text(module.read_text(encoding="utf-8"), str(module), settings)
    return [
        (d.start.row, d.message.split("(", 1)[1].split(";", 1)[0])
        for d in result.diagnostics
        if d.code == "LL001"
    ]


def test_top_package_is_the_highest_init_folder(tmp_path: Path) -> None:
    module = _package(tmp_path, "styletts2")
    top = top_package(str(module.parent))
    assert top is not None and Path(top).name == "styletts2"
    assert top_package(str(tmp_path)) is None


def test_activation_in_speech_package_is_small(tmp_path: Path) -> None:
    assert _ll001(_package(tmp_path, "styletts2")) == []


def test_same_code_in_other_package_still_reported(tmp_path: Path) -> None:
    # Negative control: nothing says audio, so the blocks' activations stay activations; the
    # file is too short to show many tokens (`unjudged`), so they are low, and say so.
    module = _package(tmp_path, "pitchnet")
    assert _ll001(module) == []
    found = _ll001_low(module)
    assert [row for row, _ in found] == [83, 84, 85, 88]
    assert all("too short to show its model" in held for _, held in found)
    speech = _ll001_low(_package(tmp_path / "speech", "styletts2"))
    assert all("speech" in held for _, held in speech)


def test_audio_video_package_still_reported(tmp_path: Path) -> None:
    # A package named for video too (an audio-video generator) is no speech package: its
    # activations stay activations (low here, in a file too short to show many tokens).
    found = _ll001_low(_package(tmp_path, "audio_video_gen"))
    assert [row for row, _ in found] == [83, 84, 85, 88]
    assert all("too short to show its model" in held for _, held in found)


# -- a loss backpropagated with no gradient is a scalar ---------------------------------------

TRAINER = Path(__file__).parent / "fixtures" / "LL001" / "negative_vae_loss_after_backward.py"


def _trainer_findings(tmp_path: Path, text: str) -> list[int]:
    module = tmp_path / "cvivit_trainer.py"
    result = check_text(text, str(module))
    return [d.start.row for d in result.diagnostics if d.code == "LL001"]


def test_vae_loss_after_backward_is_a_scalar(tmp_path: Path) -> None:
    # `loss = self.vae(img)` then `self.accelerator.backward(loss / k)`: the VAE returned its
    # loss; held across the discriminator's VAE call it costs nothing.
    assert _trainer_findings(tmp_path, TRAINER.read_text(encoding="utf-8")) == []


def test_loss_reduced_before_backward_still_reported(tmp_path: Path) -> None:
    # Negative control: `backward(loss.mean() / k)` says nothing of `loss`'s own size.
    text = TRAINER.read_text(encoding="utf-8").replace(
        "self.accelerator.backward(loss / self.grad_accum_every)",
        "self.accelerator.backward(loss.mean() / self.grad_accum_every)",
    )
    assert _trainer_findings(tmp_path, text) == [223, 246]


def test_backpropagated_scalars_forms() -> None:
    import libcst as cst

    from lifetime_lint.analysis.facts import backpropagated_scalars

    code = """
def step(self, x, grad, scaler, accelerator):
    a = self.model(x)
    accelerator.backward(a / 4)
    b = self.model(x)
    (b + 0.1 * c).backward()
    d = self.model(x)
    scaler.scale(d).backward()
    e = self.model(x)
    e.backward(grad)
    f = self.model(x)
    f.mean().backward()
    g = self.model(x)
    torch.autograd.backward(g)
    h = self.model(x)
    h.backward(gradient=grad)
"""
    function = cst.parse_module(code).body[0]
    assert isinstance(function, cst.FunctionDef)
    assert backpropagated_scalars(function) == frozenset("abcdg")
