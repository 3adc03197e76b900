"""What ManiSkill3 needs beside its pip packages, installed into the environment's own prefix (never system-wide):

- **a Vulkan driver**: SAPIEN builds its scene through Vulkan even for state-only observations. A machine with a GPU
  driver, or Mesa >= 23's lavapipe (the CPU Vulkan driver), has one. Debian 12's lavapipe (Mesa 22.3) is refused by
  SAPIEN, so on Debian 12 the driver of Mesa 25 from bookworm-backports is fetched with apt's own tools into a private
  directory and only `libvulkan_lvp.so` is kept, under `<prefix>/share/hylo/maniskill/vulkan`, with an ICD file that
  names it. It links against the libraries of Debian 12's own Mesa (LLVM 15, libdrm, xcb), so MuJoCo's EGL rendering
  keeps the stack it had: nothing under /usr changes. `hylo.envs.maniskill` points `VK_ICD_FILENAMES` at it unless
  the variable is already set.
- **the motion planner's numpy**: mani-skill's planner, mplib 0.1.1, is built against numpy 1 and crashes under the
  numpy 2 that LeRobot needs. The planner runs in a process of its own (`hylo.envs.maniskill_planner`) whose path
  starts with `<prefix>/share/hylo/maniskill/planner`: numpy 1.26 and a SciPy built for it, installed there with
  `pip install --target`. The environment's own packages (and `pip check`) are not touched.

`python -m hylo.envs.maniskill_setup` installs both (what is missing); `--check` only reports. `make test` runs it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hylo.core.errors import HyloFailure

ROOT = Path(sys.prefix) / "share" / "hylo" / "maniskill"
VULKAN_DIR = ROOT / "vulkan"
ICD_FILE = VULKAN_DIR / "lvp_icd.json"
PLANNER_DIR = ROOT / "planner"
PLANNER_PACKAGES = ("numpy==1.26.4", "scipy==1.13.1")
"""What the planner's process takes ahead of the environment's own packages: the numpy mplib 0.1.1 was built for,
and the last SciPy built for that numpy (toppra, mplib's time parametrisation, imports SciPy)."""
MESA_SUITE = "bookworm-backports"
MESA_PACKAGE = "mesa-vulkan-drivers"
COMMAND = f"{Path(sys.executable).name} -m hylo.envs.maniskill_setup"


class SetupError(HyloFailure):
    """A step of the setup failed; the message says which and what to do."""


class NotDebian12(SetupError):
    """The private Vulkan driver is for Debian 12; elsewhere the system's own driver serves."""


def vulkan_installed() -> bool:
    return ICD_FILE.is_file() and (VULKAN_DIR / "libvulkan_lvp.so").is_file()


def planner_installed() -> bool:
    return (PLANNER_DIR / "numpy" / "__init__.py").is_file() and (PLANNER_DIR / "scipy" / "__init__.py").is_file()


def _debian_release() -> str:
    try:
        return Path("/etc/debian_version").read_text().strip()
    except OSError:
        return ""


def install_vulkan() -> None:
    """Fetch Mesa's lavapipe from bookworm-backports with apt into a private directory and keep only its driver."""
    if not shutil.which("apt-get") or not _debian_release().startswith("12"):
        raise NotDebian12(
            "not Debian 12: the system's Vulkan driver is used (a GPU driver, or Mesa >= 23's lavapipe: "
            "`apt install mesa-vulkan-drivers` on Ubuntu 24.04)"
        )
    with tempfile.TemporaryDirectory(prefix="hylo-vulkan-") as tmp:
        work = Path(tmp)
        (work / "lists" / "partial").mkdir(parents=True)
        (work / "cache" / "archives" / "partial").mkdir(parents=True)
        (work / "sources.list").write_text(f"deb http://deb.debian.org/debian {MESA_SUITE} main\n")
        options = [
            f"-oDir::Etc::sourcelist={work / 'sources.list'}",
            "-oDir::Etc::sourceparts=-",
            f"-oDir::State::Lists={work / 'lists'}",
            f"-oDir::Cache={work / 'cache'}",
            "-oAPT::Sandbox::User=root" if os.geteuid() == 0 else "-oAPT::Sandbox::User=",
            "-qq",
        ]
        _run(["apt-get", *options, "update"], "apt-get update (bookworm-backports)")
        _run(["apt-get", *options, "download", f"{MESA_PACKAGE}/{MESA_SUITE}"], "apt-get download", cwd=work)
        debs = sorted(work.glob(f"{MESA_PACKAGE}_*.deb"))
        if not debs:
            raise SetupError(f"apt-get download left no {MESA_PACKAGE} package in {work}")
        _run(["dpkg-deb", "-x", str(debs[-1]), str(work / "root")], "dpkg-deb -x")
        driver = work / "root" / "usr" / "lib" / "x86_64-linux-gnu" / "libvulkan_lvp.so"
        if not driver.is_file():
            raise SetupError(f"{debs[-1].name} has no libvulkan_lvp.so")
        VULKAN_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy2(driver, VULKAN_DIR / "libvulkan_lvp.so")
    ICD_FILE.write_text(
        '{"file_format_version": "1.0.0", "ICD": {"library_path": "%s", "api_version": "1.4.305"}}\n'
        % (VULKAN_DIR / "libvulkan_lvp.so")
    )


def install_planner() -> None:
    """numpy 1.26 and SciPy 1.13 into the planner's own directory (`pip install --target`)."""
    PLANNER_DIR.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="planner-", dir=PLANNER_DIR.parent))
    try:
        _run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(staging),
             *PLANNER_PACKAGES],
            "pip install --target (the planner's numpy)",
        )  # fmt: skip
        shutil.rmtree(PLANNER_DIR, ignore_errors=True)
        staging.chmod(0o755)
        staging.rename(PLANNER_DIR)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _run(command: list[str], what: str, cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SetupError(f"{what} failed (exit {done.returncode}): {(done.stderr or done.stdout).strip()[-800:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="only report what is installed")
    args = parser.parse_args(argv)
    steps = (("Vulkan driver", vulkan_installed, install_vulkan, VULKAN_DIR),
             ("planner's numpy", planner_installed, install_planner, PLANNER_DIR))  # fmt: skip
    missing = 0
    for name, installed, install, where in steps:
        if installed():
            print(f"{name}: installed in {where}")
            continue
        if args.check:
            print(f"{name}: missing (run {COMMAND})")
            missing += 1
            continue
        print(f"{name}: installing into {where}")
        try:
            install()
        except NotDebian12 as exc:
            print(f"{name}: {exc}")
        except SetupError as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            missing += 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
