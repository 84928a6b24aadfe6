"""py-sdk-example: a skill built on the skillhost Python guest SDK.

Shows each kind of tool the SDK supports: flat and nested typed input, structured and
wrapped output, tool errors, and files in the granted data directory (read-only here).
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import List, Literal, Optional, TypedDict

from skillhost import Guest, ToolError, files, log, progress, tool  # noqa: F401 - Guest is what componentize-py runs


@dataclass
class Place:
    """A place on a trip.

    Attributes:
        city: The city's name.
        country: The country, when known.
    """

    city: str
    country: Optional[str] = None


class Pace(Enum):
    """How fast to travel."""

    SLOW = "slow"
    FAST = "fast"


class TripSummary(TypedDict):
    """What `trip` answers."""

    stops: int
    route: str
    countries: List[str]


@tool(read_only=True, idempotent=True, examples=[{"name": "Ada"}, {"name": "Ada", "tone": "warm"}])
def hello(name: str, tone: Literal["plain", "warm"] = "plain") -> dict:
    """Greet someone by name.

    Args:
        name: Who to greet.
        tone: How warmly.
    """
    log.debug(f"greeting {name}")
    greeting = f"Hello, {name}!" if tone == "plain" else f"Hello, dear {name}!"
    return {"greeting": greeting}


@tool(read_only=True, idempotent=True, examples=[{"places": [{"city": "Paris", "country": "France"}, {"city": "Turin"}]}])
def trip(places: List[Place], pace: Pace = Pace.SLOW) -> TripSummary:
    """Summarise a trip through a list of places.

    Args:
        places: The stops, in order; at least one.
        pace: How fast to travel.
    """
    if not places:
        raise ToolError.invalid_input("places: give at least one place")
    for i, place in enumerate(places):
        progress(i + 1, len(places), place.city)
    countries = sorted({p.country for p in places if p.country})
    arrow = " -> " if pace is Pace.SLOW else " => "
    return {"stops": len(places), "route": arrow.join(p.city for p in places), "countries": countries}


@tool(read_only=True)
def read_note(path: str) -> str:
    """Read a text note from the skill's data directory.

    The answer is `{"result": TEXT}`.

    :param path: The note's path, relative to the data directory.
    """
    return files.read_text(path)


@tool(destructive=True)
def save_note(path: str, text: str) -> dict:
    """Write a note into the skill's data directory (refused: the grant is read-only).

    Args:
        path: Where to write, relative to the data directory.
        text: What to write.
    """
    files.write(path, text)
    return {"written": len(text)}


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b (dividing by zero shows how an unexpected exception is reported).

    Args:
        a: The dividend.
        b: The divisor.
    """
    return a / b
