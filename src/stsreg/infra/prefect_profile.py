"""The Prefect profile ``stsreg``: what makes the ``prefect`` command a user types talk to ``make servers``' server.

The ``prefect`` CLI reads its API URL from the active profile of the user's profiles file (``~/.prefect/profiles.toml``
unless ``PREFECT_HOME`` / ``PREFECT_PROFILES_PATH`` say otherwise), not from the project. ``stsreg servers start``
writes the profile :data:`PROFILE` with its server's ``PREFECT_API_URL`` and activates it, as ``prefect profile
create/use`` + ``prefect config set`` do; ``stop`` activates the profile that was active before.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The Prefect profile ``stsreg servers start`` writes and activates (``prefect profile ls`` shows it).
PROFILE = "stsreg"


def activate_profile(api_url: str) -> str | None:
    """Write the Prefect profile :data:`PROFILE` with ``PREFECT_API_URL=api_url`` into the user's profiles file and
    make it active (what ``prefect profile create/use`` + ``prefect config set`` do); returns the profile that was
    active before (``stop`` restores it), or None when it already was ours."""
    from prefect.settings import Profile, load_profiles, save_profiles

    profiles = load_profiles()
    before = profiles.active_name
    if PROFILE in profiles.names:
        profiles.update_profile(PROFILE, {"PREFECT_API_URL": api_url})
    else:
        profiles.add_profile(Profile(name=PROFILE, settings={"PREFECT_API_URL": api_url}))
    profiles.set_active(PROFILE)
    save_profiles(profiles)
    return None if before == PROFILE else before


def deactivate_profile(previous: str | None) -> None:
    """Make ``previous`` (else ``ephemeral``) the active Prefect profile again, if :data:`PROFILE` is still active."""
    from prefect.settings import load_profiles, save_profiles

    profiles = load_profiles()
    if profiles.active_name != PROFILE:
        return  # the user switched profiles meanwhile: theirs stays
    fallback = previous if previous in profiles.names else "ephemeral"
    if fallback in profiles.names:
        profiles.set_active(fallback)
        save_profiles(profiles)


def profile_active() -> bool:
    """Whether the user's active Prefect profile is :data:`PROFILE` (read from the profiles file, not imported
    settings: this runs before Prefect is configured)."""
    import tomllib

    path = Path(os.environ.get("PREFECT_PROFILES_PATH")
                or Path(os.environ.get("PREFECT_HOME", Path.home() / ".prefect")) / "profiles.toml")
    try:
        return tomllib.loads(path.read_text()).get("active") == PROFILE
    except (OSError, tomllib.TOMLDecodeError):
        return False
