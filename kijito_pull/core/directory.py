"""A persona name against the account's persona directory (`GET /api/personas`).

Inbox names are case-sensitive on the server: mail for `river` never reaches `River`, and reading
`River` just finds an empty inbox. `look_up` says whether a name is listed and which listed names
differ from it only in case, and `Listing.variant_clause` is the one sentence that says so; the
doctor's `persona` check and `pull` share both, so they always agree. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Listing:
    """What the directory says about one name: listed exactly, and the listed names equal to it but for case."""

    name: str
    listed: bool
    variants: tuple[str, ...]
    size: int  # how many personas the directory lists

    def variant_clause(self) -> str | None:
        """'is not in the account's directory, but river is: ...', or None when the name is listed or has
        no case variant (follows the name and where it came from)."""
        if self.listed or not self.variants:
            return None
        return (f"is not in the account's directory, but {', '.join(self.variants)} "
                f"{'is' if len(self.variants) == 1 else 'are'}: inbox names are case-sensitive, so mail for "
                f"{self.variants[0]} never reaches {self.name}")


def look_up(name: str, names: Iterable[str]) -> Listing:
    listed = list(names)
    folded = name.casefold()
    variants = tuple(n for n in listed if n != name and n.casefold() == folded)
    return Listing(name, name in listed, variants, len(listed))
