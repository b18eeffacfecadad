"""`lifetime-lint profile`: real programs with dead tensors of known sizes, run on CPU torch.

Each program is run through the real command in a subprocess; the saved profile must give the
bytes the finding's names held at the function's peak, within 5% (here exactly, since the CPU
tracker counts storages byte for byte).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

MIB = 1024 * 1024

PIPELINE = """
import torch


class Decoder(torch.nn.Module):
    def forward(self, latents):
        hidden = latents.repeat(4)
        return hidden.sum(dim=0, keepdim=True)


class Pipeline:
    def __init__(self):
        self.vae = Decoder()

    def __call__(self, n):
        conditioning = torch.ones(n)
        latents = conditioning * 0.5
        image = self.vae(latents)
        return image


def never_called(vae, video_latents):
    frames = vae.decode(video_latents)
    y = frames * 2
    return vae.decode(y)


if __name__ == "__main__":
    Pipeline()(16 * 1024 * 1024)  # conditioning: 64 MiB of float32
"""

TILES = """
import torch


class Decoder(torch.nn.Module):
    def forward(self, z):
        return z.repeat(2)


class VAE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = Decoder()

    def decode(self, latents, num_tiles):
        tiles = []
        for tile in latents.chunk(num_tiles):
            decoded = self.decoder(tile)
            tiles.append(decoded)
        return torch.cat(tiles)

    def decode_running(self, latents, num_tiles):
        out = None
        for tile in latents.chunk(num_tiles):
            decoded = self.decoder(tile)
            out = decoded if out is None else torch.cat([out, decoded])
        return out


if __name__ == "__main__":
    vae = VAE()
    z = torch.ones(8 * 1024 * 1024)  # 32 MiB: 8 tiles of 4 MiB, decoded to 8 MiB each
    vae.decode(z, 8)
    vae.decode_running(z, 8)
"""

RECURSION_GENERATOR_RAISE = """
import torch


class Heavy(torch.nn.Module):
    def forward(self, x):
        return x.repeat(3)


class Runner:
    def __init__(self):
        self.model = Heavy()

    def recurse(self, depth, n):
        block = torch.ones(n)
        total = block.sum()
        result = self.model(total)
        if depth:
            return result + self.recurse(depth - 1, n)
        return result

    def frames(self, n, count):
        for index in range(count):
            cache = torch.ones(n)
            value = cache * index
            yield self.model(value)

    def fails(self, n):
        kept = torch.ones(n)
        doubled = kept * 2
        self.model(doubled)
        raise RuntimeError("the program's own error")


if __name__ == "__main__":
    runner = Runner()
    runner.recurse(3, 1024 * 1024)  # block: 4 MiB per level
    for frame in runner.frames(2 * 1024 * 1024, 3):  # cache: 8 MiB per step
        pass
    runner.fails(512 * 1024)  # kept: 2 MiB
"""


def profile(tmp_path: Path, source: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(source), encoding="utf-8")
    saved = tmp_path / "profile.json"
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "profile", "--device", "cpu", "--save", str(saved),
         *extra, str(script)],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert saved.exists(), completed.stderr
    return completed, json.loads(saved.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory):
    """`profile(folder, source)` run once per program for the module's tests that only read
    its output and saved profile: returns (folder, completed, data). A test that edits the
    program or the profile copies them into its own tmp_path first."""
    runs: dict[str, tuple[Path, subprocess.CompletedProcess, dict]] = {}

    def run(source: str) -> tuple[Path, subprocess.CompletedProcess, dict]:
        if source not in runs:
            folder = tmp_path_factory.mktemp("profiled")
            runs[source] = (folder, *profile(folder, source))
        return runs[source]

    return run


def _copy_profiled(folder: Path, tmp_path: Path) -> None:
    """The program and its saved profile, into a test's own folder (to be edited there)."""
    for name in ("program.py", "profile.json"):
        shutil.copy2(folder / name, tmp_path / name)


def measured(data: dict, code: str, row: int) -> dict | None:
    for item in data["findings"]:
        if item["code"] == code and item["location"]["row"] == row:
            return item["measured"]
    raise AssertionError(f"no {code} finding at row {row}: {json.dumps(data['findings'])[:2000]}")


def test_conditioning_held_across_a_decode(profiled) -> None:
    _, completed, data = profiled(PIPELINE)
    assert completed.returncode == 0, completed.stderr
    held = measured(data, "LL001", 17)
    assert held is not None
    assert held["bytes"] == pytest.approx(64 * MIB, rel=0.05)
    assert held["names"] == ["conditioning"]
    assert held["calls"] == 1
    assert held["peak_row"] == 18  # inside the decode
    # conditioning + latents + the decoder's 4x activation
    assert held["peak_bytes"] == pytest.approx((64 + 64 + 256) * MIB, rel=0.05)
    assert measured(data, "LL001", 24) is None  # never called: not executed
    assert "Not executed:" in completed.stdout
    assert "64.0 MiB" in completed.stdout


def test_tiles_and_running_concatenation(tmp_path: Path) -> None:
    _, data = profile(tmp_path, TILES)
    tiles = measured(data, "LL002", 20)
    # At the concatenation the list holds 8 decoded tiles of 8 MiB; the last one is also bound
    # to `decoded`, so releasing the list alone would free 7 of them.
    assert tiles["bytes"] == pytest.approx(7 * 8 * MIB, rel=0.05)
    assert tiles["peak_bytes"] == pytest.approx((32 + 64 + 64) * MIB, rel=0.05)
    running = measured(data, "LL002", 26)
    # Before the last step's copy: the running result (7 tiles) and the new tile.
    assert running["bytes"] == pytest.approx(8 * 8 * MIB, rel=0.05)
    assert running["names"] == ["out", "decoded"]


def test_recursion_generators_and_a_program_that_raises(tmp_path: Path) -> None:
    completed, data = profile(tmp_path, RECURSION_GENERATOR_RAISE)
    assert completed.returncode == 1
    assert "RuntimeError" in completed.stdout
    recursive = measured(data, "LL001", 16)
    assert recursive["bytes"] == pytest.approx(4 * MIB, rel=0.05)
    assert recursive["calls"] == 4
    generator = measured(data, "LL001", 25)
    assert generator["bytes"] == pytest.approx(8 * MIB, rel=0.05)
    failing = measured(data, "LL001", 30)
    assert failing["bytes"] == pytest.approx(2 * MIB, rel=0.05)


def test_shared_storage_counts_once_and_a_view_counts_with_its_base() -> None:
    import sys as _sys

    from lifetime_lint.runtime.profiling import ReferenceCounter

    counter = ReferenceCounter(torch)

    def frame_with_views():
        base = torch.ones(1024 * 1024)  # 4 MiB
        view = base[: 1024 * 512]
        alias = base
        other = torch.ones(256 * 1024)  # 1 MiB
        held_elsewhere = torch.ones(256 * 1024)
        keeper = [held_elsewhere]
        local_values = _sys._getframe().f_locals
        result = counter.held_bytes(
            {
                "view-finding": [local_values["view"]],
                "base-and-view": [
                    local_values["base"],
                    local_values["alias"],
                    local_values["view"],
                ],
                "other": [local_values["other"]],
                "elsewhere": [local_values["held_elsewhere"]],
            },
            local_values,
        )
        del base, view, alias, other, keeper, local_values
        return result

    held = frame_with_views()
    # The view's storage is its base's: counted once, for the finding that holds both.
    assert held["base-and-view"] == 4 * MIB
    assert held["view-finding"] == 0  # its base stays bound: releasing the view frees nothing
    assert held["other"] == 1 * MIB
    assert held["elsewhere"] == 0  # a list outside the finding keeps it alive


def test_a_view_kept_elsewhere_keeps_the_storage() -> None:
    import sys as _sys

    from lifetime_lint.runtime.profiling import ReferenceCounter

    counter = ReferenceCounter(torch)
    outside = []

    def frame():
        dead = torch.ones(1024 * 1024)
        outside.append(dead[:10])  # a view held by something else
        local_values = _sys._getframe().f_locals
        result = counter.held_bytes({"k": [local_values["dead"]]}, local_values)
        del dead, local_values
        return result

    assert frame() == {"k": 0}


def test_usage_errors(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "profile", str(tmp_path / "missing.py")],
        capture_output=True,
        text=True,
    )
    assert completed.returncode == 2
    assert "no such script" in completed.stderr


def test_compare_runs_before_and_after_fix_on_a_copy(tmp_path: Path) -> None:
    script = tmp_path / "program.py"
    source = textwrap.dedent(PIPELINE).replace(
        "    Pipeline()(16 * 1024 * 1024)", "    image = Pipeline()(16 * 1024 * 1024)"
    )
    script.write_text(source, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "profile", "--device", "cpu", "--compare",
         "--check-output", "image", str(script.name)],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    assert script.read_text(encoding="utf-8") == source  # the original is never written
    # Both findings of the file it ran are fixed, the one in `never_called` too.
    assert "--fix applied 2 fixes in 1 files: program.py" in completed.stdout
    # The measured 64 MiB of conditioning is exactly what the fix takes off the peak.
    assert "384.0 MiB     320.0 MiB    -16.7%  program.py: Pipeline.__call__" in completed.stdout
    assert "Outputs are bitwise equal." in completed.stdout


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) into rows of pixel bytes."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    position, chunks, header = 8, [], None
    while position < len(data):
        (length,) = struct.unpack(">I", data[position : position + 4])
        kind = data[position + 4 : position + 8]
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    assert header is not None
    width, height, depth, color, *_ = header
    assert depth == 8 and color in (2, 6)
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for row_index in range(height):
        start = row_index * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else corner)
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(
            bytes(line)
            if channels == 3
            else bytes(b for j in range(0, stride, 4) for b in line[j : j + 3])
        )
        previous = line
    return width, height, rows


def test_html_page_draws_the_timeline_and_the_held_bytes(tmp_path: Path) -> None:
    import shutil

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(TILES), encoding="utf-8")
    page = tmp_path / "profile.html"
    subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "profile", "--device", "cpu", "--html", str(page),
         script.name],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    text = page.read_text(encoding="utf-8")
    assert "http" not in text.split("<body>")[0]  # nothing fetched: styles are inline
    assert "<script" not in text
    assert text.count('<polyline class="timeline"') == 2
    assert text.count('class="held"') == 2
    assert "56.0 MiB" in text and "64.0 MiB" in text
    if browser is None:
        pytest.skip("no Chromium on this machine: the page was checked as text only")
    shot = tmp_path / "shot.png"
    profile_dir = tmp_path / "chromium-profile"
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile_dir}", f"--screenshot={shot}", "--window-size=800,1000",
         page.as_uri()],
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    assert shot.exists(), "Chromium wrote no screenshot"
    _, _, rows = _png_pixels(shot.read_bytes())

    def count(color: tuple[int, int, int]) -> int:
        target = bytes(color)
        return sum(1 for row in rows for i in range(0, len(row), 3) if row[i : i + 3] == target)

    assert count((0x1F, 0x77, 0xB4)) > 500  # the timelines and peak markers were drawn
    assert count((0xD6, 0x27, 0x28)) > 200  # the held-bytes bars at the peaks were drawn


MISSED = """
import torch


class Heavy(torch.nn.Module):
    def forward(self, x):
        return x.repeat(3)


class Runner:
    def __init__(self):
        self.model = Heavy()

    def run(self, n):
        cond = torch.ones(n)
        latents = cond * 2
        mask = torch.ones(2 * n)
        scale = float(mask.mean())
        out = self.model(latents) * scale
        return out


if __name__ == "__main__":
    Runner().run(1024 * 1024)
"""


def test_dead_tensors_without_a_finding_are_reported_as_missed(tmp_path: Path) -> None:
    completed, data = profile(tmp_path, MISSED)
    found = {item["name"]: item for item in data["missed"]}
    # Whatever LL001 reports in `run`, every dead tensor it does not report is measured here,
    # and names it does report are never listed twice.
    reported = {
        name for item in data["findings"] for name in (item["measured"] or {}).get("names", [])
    }
    assert reported, data["findings"]
    for name, size in (("cond", 4 * MIB), ("mask", 8 * MIB)):
        if name not in reported:
            assert found[name]["bytes"] == pytest.approx(size, rel=0.05)
            assert found[name]["function"] == "Runner.run"
    assert not reported & set(found)
    assert set(found) | reported >= {"cond", "mask"}  # each dead tensor is one or the other
    if found:
        assert "what the rules missed" in completed.stdout


def lint(cwd: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "check", "--no-cache", *arguments],
        cwd=str(cwd), capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_check_with_a_saved_profile_keeps_what_was_measured_to_matter(
    tmp_path: Path, profiled
) -> None:
    """`check --profile FILE --min-bytes SIZE`: the run's measurement, matched by fingerprint
    after the code moved, decides what is shown, in every format."""
    folder, _, data = profiled(PIPELINE)
    _copy_profiled(folder, tmp_path)
    assert data["files"] == ["program.py"]
    script = tmp_path / "program.py"
    # Code added above both findings shifts every line: the match must not depend on rows.
    moved = script.read_text(encoding="utf-8").replace(
        "import torch\n", "import torch\n\nSCALE = 1.0\n\n\ndef helper():\n    return SCALE\n", 1
    )
    script.write_text(moved, encoding="utf-8")
    profile_file = str(tmp_path / "profile.json")

    shown = lint(tmp_path, "--profile", profile_file, "--min-bytes", "32MiB", "program.py")
    assert shown.returncode == 1, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if ": LL001" in line]
    assert len(lines) == 1, shown.stdout
    assert lines[0].startswith("program.py:23:")  # row 17 before the shift
    assert "[measured: 64.0 MiB, 16.7% of the peak]" in lines[0]
    assert "1 finding in code the profiled run never executed not shown" in shown.stderr

    above = lint(tmp_path, "--profile", profile_file, "--min-bytes", "1GiB", "program.py")
    assert above.returncode == 0, above.stdout + above.stderr
    assert "1 finding measured below 1GiB not shown" in above.stderr
    exact = lint(tmp_path, "--profile", profile_file, "--min-bytes", str(64 * MIB), "program.py")
    assert exact.returncode == 1  # a plain byte count; the bar is inclusive

    as_json = lint(tmp_path, "--profile", profile_file, "--min-bytes", "64MiB",
                   "--output-format", "json", "program.py")  # fmt: skip
    (item,) = json.loads(as_json.stdout)
    assert item["location"]["row"] == 23
    expected = {"bytes": 64 * MIB, "peak_row": 18, "calls": 1}
    assert {key: item["measured"][key] for key in expected} == expected
    assert item["measured"]["peak_bytes"] == pytest.approx(384 * MIB, rel=0.05)
    as_sarif = lint(tmp_path, "--profile", profile_file, "--min-bytes", "64MiB",
                    "--output-format", "sarif", "program.py")  # fmt: skip
    (result,) = json.loads(as_sarif.stdout)["runs"][0]["results"]
    assert result["properties"]["measured"]["bytes"] == 64 * MIB

    # Without --min-bytes: the default run, annotated; code that never ran says so.
    annotated = lint(tmp_path, "--profile", profile_file, "program.py")
    assert "[measured: not executed]" in annotated.stdout
    # Without --profile nothing changes shape.
    plain = lint(tmp_path, "--output-format", "json", "program.py")
    assert all("measured" not in item for item in json.loads(plain.stdout))


def test_check_profile_keeps_new_code_of_an_executed_file_unmeasured(
    tmp_path: Path, profiled
) -> None:
    folder, _, _ = profiled(PIPELINE)
    _copy_profiled(folder, tmp_path)
    script = tmp_path / "program.py"
    script.write_text(
        script.read_text(encoding="utf-8").replace(
            "        latents = conditioning * 0.5\n",
            "        latents = conditioning * 0.5\n        extra = torch.ones(n)\n"
            "        scaled = extra * 2\n        self.vae(scaled)\n",
        ),
        encoding="utf-8",
    )
    checked = lint(tmp_path, "--profile", "profile.json", "--min-bytes", "1MiB",
                   "--output-format", "json", "program.py")  # fmt: skip
    items = json.loads(checked.stdout)
    new = [item for item in items if item["measured"] is None]
    assert new, items  # the new finding is shown: the profile knows nothing about it
    assert "in files the profiled run executed but not in the profile" in checked.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--profile", "missing.json"], "missing.json: profile not found"),
        (["--profile", "corrupt.json"], "corrupt.json: cannot read the profile"),
        (["--profile", "other.json"], "not a saved lifetime-lint profile"),
        (["--profile", "old.json"], "malformed profile"),
        (["--profile", "profile.json", "--min-bytes", "64 parsecs"], "--min-bytes: not a size"),
        (["--profile", "profile.json", "--min-bytes", "-1"], "--min-bytes: not a size"),
        (["--min-bytes", "64MiB"], "--min-bytes needs --profile"),
    ],
)
def test_check_profile_usage_errors(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "program.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "profile.json").write_text(
        json.dumps({"version": 1, "files": [], "findings": []}), encoding="utf-8"
    )
    (tmp_path / "corrupt.json").write_text('{"version": 1, "findi', encoding="utf-8")
    (tmp_path / "other.json").write_text("[]", encoding="utf-8")
    (tmp_path / "old.json").write_text(json.dumps({"version": 1, "findings": [{}]}), "utf-8")
    completed = lint(tmp_path, *arguments, "program.py")
    assert completed.returncode == 2
    assert message in completed.stderr, completed.stderr


def test_profile_reports_in_sarif_and_concise_text(tmp_path: Path) -> None:
    completed, _ = profile(tmp_path, PIPELINE, "--output-format", "sarif")
    results = json.loads(completed.stdout)["runs"][0]["results"]
    by_row = {r["locations"][0]["physicalLocation"]["region"]["startLine"]: r for r in results}
    assert by_row[17]["properties"]["measured"]["bytes"] == 64 * MIB
    assert by_row[24]["properties"]["measured"] is None  # never called
    concise, _ = profile(tmp_path, PIPELINE, "--output-format", "concise")
    assert "[measured: 64.0 MiB, 16.7% of the peak]" in concise.stdout


SUBGROUP_GATHER = """
import os
import sys

import torch
import torch.distributed as dist


def group_root(x, group):
    out = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, x, group=group)
    if dist.get_rank(group) == 0:
        return torch.cat(out)
    return None


if __name__ == "__main__":
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=sys.argv[1], rank=rank, world_size=world)
    group = dist.new_group([1, 2, 3])  # global rank 0 is not a member
    if rank in (1, 2, 3):
        x = torch.full((1024 * 1024,), float(rank))  # 4 MiB per rank
        result = group_root(x, group)
        assert (result is not None) == (rank == 1)
        if result is not None:
            assert torch.equal(result[: x.numel()], torch.full_like(x, 1.0))
    dist.barrier()
    dist.destroy_process_group()
"""


def test_subgroup_all_gather_discarded_on_most_ranks_is_measured_there(tmp_path: Path) -> None:
    """A real 4-process gloo world; the all_gather runs on the subgroup [1, 2, 3], whose
    group rank 0 (global rank 1) alone reads the receive buffers. On global ranks 2 and 3,
    which discard them, the LL003 finding holds exactly the 3 x 4 MiB of receive buffers."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(SUBGROUP_GATHER), encoding="utf-8")
    init = (tmp_path / "rendezvous").as_uri()
    processes = []
    for rank in range(4):
        environment = dict(os.environ, RANK=str(rank), WORLD_SIZE="4")
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "lifetime_lint", "profile", "--device", "cpu", "--save",
             str(tmp_path / f"rank{rank}.json"), script.name, init],
            cwd=str(tmp_path), env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        ))  # fmt: skip
    outputs = [process.communicate(timeout=600) for process in processes]
    for process, (_, stderr) in zip(processes, outputs):
        assert process.returncode == 0, stderr
    for rank in (2, 3):
        data = json.loads((tmp_path / f"rank{rank}.json").read_text(encoding="utf-8"))
        held = measured(data, "LL003", 11)
        assert held is not None and held["calls"] == 1
        assert held["bytes"] == pytest.approx(3 * 4 * MIB, rel=0.05)
        assert "out" in held["names"]
    outside = json.loads((tmp_path / "rank0.json").read_text(encoding="utf-8"))
    assert measured(outside, "LL003", 11) is None  # not a member: never ran there


def test_two_findings_about_the_same_tensor_each_count_it() -> None:
    """`out_` is named by a running-concatenation finding and by its own `del` finding: either
    fix alone releases it, so each finding counts it (what its fix alone frees)."""
    import sys as _sys

    from lifetime_lint.runtime.profiling import ReferenceCounter

    counter = ReferenceCounter(torch)

    def frame():
        out = torch.ones(2 * 1024 * 1024)  # 8 MiB
        out_ = torch.ones(1024 * 1024)  # 4 MiB
        local_values = _sys._getframe().f_locals
        result = counter.held_bytes(
            {
                "del out_": [local_values["out_"]],
                "running cat": [local_values["out"], local_values["out_"]],
            },
            local_values,
        )
        del out, out_, local_values
        return result

    assert frame() == {"del out_": 4 * MIB, "running cat": 12 * MIB}


def test_nested_lists_and_a_chunk_also_bound_to_a_name_count() -> None:
    """A list of rows of tiles (`rows`) holds its tiles through the row lists; a row also bound
    to a loop name is kept by that name; a chunk in the finding's own list that is also bound
    to one of the finding's names (`time`, `decoded`) is the finding's."""
    import sys as _sys

    from lifetime_lint.runtime.profiling import ReferenceCounter

    counter = ReferenceCounter(torch)

    def frame():
        rows = [[torch.ones(256 * 1024) for _ in range(3)] for _ in range(4)]  # 12 x 1 MiB
        row = rows[-1]  # the last row is still bound to the loop's name
        time = [torch.ones(256 * 1024) for _ in range(2)]
        decoded = torch.ones(512 * 1024)  # 2 MiB
        time.append(decoded)
        local_values = _sys._getframe().f_locals
        result = counter.held_bytes(
            {
                "del rows": [local_values["rows"]],
                "del time": [local_values["time"]],
                "writer of time": [local_values["time"], local_values["decoded"]],
            },
            local_values,
        )
        del rows, row, time, decoded, local_values
        return result

    assert frame() == {"del rows": 9 * MIB, "del time": 2 * MIB, "writer of time": 4 * MIB}


# -- the measured bytes predict the drop of the program's peak after that fix alone -------------

ENCODE_THEN_DECODE = """
import torch


class Block(torch.nn.Module):
    def forward(self, x):
        hidden = x.repeat(4)
        return hidden.sum(dim=0, keepdim=True)


class Pipeline:
    def __init__(self):
        self.text_encoder = Block()
        self.vae = Block()

    def encode(self, n):
        tokens = torch.ones(n)
        embeds = tokens * 2
        hidden = self.text_encoder(embeds)
        return hidden

    def __call__(self, n):
        prompt = self.encode(n // 4)
        conditioning = torch.ones(n)
        latents = conditioning * 0.5 + prompt
        image = self.vae(latents)
        return image


if __name__ == "__main__":
    Pipeline()(16 * 1024 * 1024)  # conditioning: 64 MiB; tokens: 16 MiB, gone before the decode
"""

# Each program in turn, in one process (one torch import): a meter counts only the storages
# created while it is active, and the previous program's globals are dropped and collected
# before the next one starts, so each peak is that program's alone.
PEAK_OF = """
import gc, runpy, sys, torch
from lifetime_lint.runtime.profiling import StorageMeter
for path in sys.argv[1:]:
    meter = StorageMeter(torch)
    namespace = runpy.run_path(path, run_name="__main__")
    meter.close()
    print("peak", meter.peak())
    del namespace
    gc.collect()
"""


def program_peaks(tmp_path: Path, scripts: list[Path]) -> list[int]:
    """Each program's peak of live storage bytes, run plainly (no tracer)."""
    harness = tmp_path / "peak_of.py"
    harness.write_text(PEAK_OF, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, str(harness), *map(str, scripts)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    peaks = [
        int(line.split()[1]) for line in completed.stdout.splitlines() if line.startswith("peak ")
    ]
    assert len(peaks) == len(scripts), completed.stdout
    return peaks


def single_fix_drops(tmp_path: Path, source: str) -> dict[tuple[str, int], int]:
    """(code, row) -> how much the program's peak drops when that finding's fix alone is
    applied (the edits the tool makes, on a copy)."""
    import dataclasses

    from lifetime_lint.analysis.significance import SETTING
    from lifetime_lint.config import Settings
    from lifetime_lint.engine import Linter
    from lifetime_lint.fixes import apply_edits

    text = textwrap.dedent(source)
    original = tmp_path / "original.py"
    original.write_text(text, encoding="utf-8")
    settings = Settings()
    linter = Linter(dataclasses.replace(settings, extra={**settings.extra, SETTING: "low"}))
    diagnostics, error = linter.lint_text(str(original), text, "\n")
    assert error is None
    variants = {}
    for d in diagnostics:
        if d.fix is None:
            continue
        variant = tmp_path / f"{d.code}_{d.start.row}.py"
        variant.write_text(apply_edits(text, d.fix.edits), encoding="utf-8")
        variants[(d.code, d.start.row)] = variant
    before, *after = program_peaks(tmp_path, [original, *variants.values()])
    return {key: before - peak for key, peak in zip(variants, after)}


def test_measured_bytes_predict_the_drop_of_the_fix_alone(tmp_path: Path, profiled) -> None:
    """Issue 16's proof on CPU: a finding's `bytes` (at the peak of the outermost traced call
    that ran its function) is the drop of the program's peak when its fix alone is applied,
    within 10%, also for a finding whose own function peaks while the program does not."""
    _, _, data = profiled(ENCODE_THEN_DECODE)
    drops = single_fix_drops(tmp_path, ENCODE_THEN_DECODE)
    assert set(drops) == {("LL001", 18), ("LL001", 25)}
    for (code, row), drop in drops.items():
        bytes_ = measured(data, code, row)["bytes"]  # type: ignore[index]
        assert abs(bytes_ - drop) <= 0.1 * max(drop, bytes_) + 64 * 1024, (code, row, bytes_, drop)


def test_a_finding_inside_an_inner_call_is_worth_what_it_holds_at_the_programs_peak(
    profiled,
) -> None:
    _, _, data = profiled(ENCODE_THEN_DECODE)
    tokens = measured(data, "LL001", 18)
    assert tokens is not None and tokens["names"] == ["tokens"]
    # At `encode`'s own peak (inside the text encoder) `tokens` holds 16 MiB; at the program's
    # peak (inside the decode) `encode` has returned: releasing `tokens` lowers it by nothing.
    assert tokens["own_bytes"] == pytest.approx(16 * MIB, rel=0.05)
    assert tokens["bytes"] == 0
    assert tokens["outermost"] == "Pipeline.__call__"
    conditioning = measured(data, "LL001", 25)
    assert conditioning["bytes"] == pytest.approx(64 * MIB, rel=0.05)
    assert conditioning["row_at_program_peak"] == 26  # inside the decode


def test_a_script_named_relative_to_the_working_folder_is_attributed_too(tmp_path: Path) -> None:
    (tmp_path / "program.py").write_text(textwrap.dedent(ENCODE_THEN_DECODE), encoding="utf-8")
    saved = tmp_path / "profile.json"
    subprocess.run(
        [sys.executable, "-m", "lifetime_lint", "profile", "--device", "cpu", "--save", str(saved),
         "program.py"],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    conditioning = measured(json.loads(saved.read_text(encoding="utf-8")), "LL001", 25)
    assert conditioning["outermost"] == "Pipeline.__call__"
    assert conditioning["row_at_program_peak"] == 26
    assert conditioning["bytes"] == pytest.approx(64 * MIB, rel=0.05)


# -- a tiled decode: lists of rows of tiles, blending in place, a final concatenation ------------

TILED_DECODE = """
import torch

WORKSPACE = {workspace}


class Decoder(torch.nn.Module):
    def forward(self, z):
        hidden = z.repeat_interleave(4, dim=-1).repeat_interleave(4, dim=-2)
        workspace = hidden.repeat(WORKSPACE, 1, 1, 1, 1)  # the decoder's own activations
        return hidden * 2.0 + workspace[:1] * 0.0


class VAE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.decoder = Decoder()
        self.tile_min = 8
        self.tile_stride = 6

    def blend_v(self, a, b, extent):
        extent = min(a.shape[-2], b.shape[-2], extent)
        for y in range(extent):
            b[..., y, :] = a[..., -extent + y, :] * (1 - y / extent) + b[..., y, :] * (y / extent)
        return b

    def blend_h(self, a, b, extent):
        extent = min(a.shape[-1], b.shape[-1], extent)
        for x in range(extent):
            b[..., x] = a[..., -extent + x] * (1 - x / extent) + b[..., x] * (x / extent)
        return b

    def tiled_decode(self, z):
        frames, height, width = z.shape[-3:]
        blend = (self.tile_min - self.tile_stride) * 4
        stride = self.tile_stride * 4
        rows = []
        for i in range(0, height, self.tile_stride):
            row = []
            for j in range(0, width, self.tile_stride):
                time = []
                for k in range(frames):
                    tile = z[:, :, k : k + 1, i : i + self.tile_min, j : j + self.tile_min]
                    tile = tile * 1.0
                    decoded = self.decoder(tile)
                    time.append(decoded)
                row.append(torch.cat(time, dim=2))
            rows.append(row)
        result_rows = []
        for i, row in enumerate(rows):
            result_row = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self.blend_v(rows[i - 1][j], tile, blend)
                if j > 0:
                    tile = self.blend_h(row[j - 1], tile, blend)
                result_row.append(tile[:, :, :, :stride, :stride])
            result_rows.append(torch.cat(result_row, dim=-1))
        dec = torch.cat(result_rows, dim=3)[:, :, :, : height * 4, : width * 4]
        dec = torch.clamp(dec, min=-1.0, max=1.0)
        return dec


if __name__ == "__main__":
    torch.manual_seed(0)
    z = torch.randn(1, 4, 3, 24, 36)  # 4 x 6 tiles of 8 x 8 latents (edges 6), 3 frames
    VAE().tiled_decode(z)
"""


def _line(source: str, text: str) -> int:
    """The row of the first line of the (dedented) program that contains `text`."""
    for number, line in enumerate(textwrap.dedent(source).splitlines(), start=1):
        if text in line:
            return number
    raise AssertionError(text)


def _tiled_sizes() -> dict[str, int]:
    """What the lists hold past the loops, from the shapes: tiles are 4 channels x 3 frames x
    (4 x tile height) x (4 x tile width) float32; heights 8, 8, 8, 6 and widths 8 x 5, 6."""
    heights, widths = [8, 8, 8, 6], [8, 8, 8, 8, 8, 6]
    tile = lambda h, w: 4 * 3 * (4 * h) * (4 * w) * 4  # noqa: E731
    return {
        # every row but the last, which the loop name `row` still holds
        "rows": sum(tile(h, w) for h in heights[:-1] for w in widths),
        # 4 blended rows cropped to 24 x 144 pixels
        "result_rows": 4 * (4 * 3 * 24 * 144 * 4),
        # the last tile's 3 frames (6 x 6 latents); `decoded` also holds the last one
        "time": 2 * tile(6, 6) // 3,
        "time and decoded": tile(6, 6),
    }


def test_tiled_decode_lists_past_the_loops_are_measured_and_predict_each_fix(
    tmp_path: Path,
) -> None:
    """The Wan VAE's tiled-decode structure with a light decoder: the program's peak is past the
    loops (the final clamp), where `rows` (a list of row lists), `result_rows` and the last
    `time` are dead but bound. Each finding's bytes are the known list bytes within 5% and the
    drop of the program's peak when its fix alone is applied, within 5%."""
    source = TILED_DECODE.format(workspace=1)
    _, data = profile(tmp_path, source)
    sizes = _tiled_sizes()
    cat_time, cat_rows = _line(source, "torch.cat(time"), _line(source, "torch.cat(result_rows")
    last_use_of_rows = _line(source, "rows[i - 1][j]")
    rows = measured(data, "LL001", last_use_of_rows)
    assert rows["names"] == ["rows"]
    assert rows["row_at_program_peak"] == _line(source, "torch.clamp")
    assert rows["bytes"] == pytest.approx(sizes["rows"], rel=0.05)
    result_rows = measured(data, "LL002", cat_rows)
    assert result_rows["bytes"] == pytest.approx(sizes["result_rows"], rel=0.05)
    time_list = measured(data, "LL002", cat_time)  # its fix deletes `decoded` too
    assert time_list["names"] == ["time", "decoded"]
    assert time_list["bytes"] == pytest.approx(sizes["time and decoded"], rel=0.05)
    assert measured(data, "LL001", cat_time)["bytes"] == pytest.approx(sizes["time"], rel=0.05)
    drops = single_fix_drops(tmp_path, source)
    assert set(drops) == {
        ("LL001", cat_time),
        ("LL002", cat_time),
        ("LL001", last_use_of_rows),
        ("LL002", cat_rows),
    }
    for (code, row), drop in drops.items():
        bytes_ = measured(data, code, row)["bytes"]  # type: ignore[index]
        assert bytes_ == pytest.approx(drop, rel=0.05), (code, row, bytes_, drop)


def test_tiled_decode_whose_peak_is_in_a_decoder_call_gives_live_lists_nothing(
    tmp_path: Path,
) -> None:
    """With a heavy decoder the peak is inside the last tile's decoder call: the lists still
    hold tiles there, but they are read later, so no fix frees them at the peak (`del rows`
    runs after the blending; the writer of `time` holds its whole output from the first
    chunk on and raises this peak). Each finding is worth 0 and no single fix lowers it."""
    source = TILED_DECODE.format(workspace=400)
    _, data = profile(tmp_path, source)
    rows = measured(data, "LL001", _line(source, "rows[i - 1][j]"))
    assert rows["held_bytes"] > 0 and rows["bytes"] == 0
    assert rows["row_at_program_peak"] == _line(source, "decoded = self.decoder(tile)")
    drops = single_fix_drops(tmp_path, source)
    assert (
        drops[("LL002", _line(source, "torch.cat(time"))] < 0
    )  # the writer's output is alive during the decoder calls
    for (code, row), drop in drops.items():
        assert measured(data, code, row)["bytes"] == 0 and drop <= 0, (code, row, drop)
