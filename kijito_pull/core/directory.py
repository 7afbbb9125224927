"""A persona name against the account's persona directory (`GET /api/personas`).

Inbox names are case-sensitive on the server: mail for `river` never reaches `River`, and reading
`River` just finds an empty inbox. `look_up` says whether a name is listed, which listed names
differ from it only in case and which are spelt like it; `Listing.variant_clause` and
`Listing.unlisted_clause` are the sentences that say so; the doctor's `persona` check and `pull`
share them, so they always agree. Standard library only.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Listing:
    """What the directory says about one name: listed exactly, and the listed names equal to it but for case."""

    name: str
    listed: bool
    variants: tuple[str, ...]
    size: int  # how many personas the directory lists
    nearest: tuple[str, ...] = ()  # listed names spelt like it (difflib), for a name that is not listed

    def variant_clause(self) -> str | None:
        """'is not in the account's directory, but river is: ...', or None when the name is listed or has
        no case variant (follows the name and where it came from)."""
        if self.listed or not self.variants:
            return None
        return (f"is not in the account's directory, but {', '.join(self.variants)} "
                f"{'is' if len(self.variants) == 1 else 'are'}: inbox names are case-sensitive, so mail for "
                f"{self.variants[0]} never reaches {self.name}")

    def unlisted_clause(self) -> str | None:
        """'is not in the account's directory (3 personas; the nearest: river): ...', or None when the name
        is listed, has a case variant (`variant_clause` says that) or the directory lists nobody."""
        if self.listed or self.variants or not self.size:
            return None
        near = f"; the nearest: {', '.join(self.nearest)}" if self.nearest else ""
        count = f"{self.size} persona" + ("" if self.size == 1 else "s")
        return (f"is not in the account's directory ({count}{near}): nobody has written to it yet, or the "
                f"name is misspelt")


def look_up(name: str, names: Iterable[str]) -> Listing:
    listed = list(names)
    folded = name.casefold()
    variants = tuple(n for n in listed if n != name and n.casefold() == folded)
    nearest = tuple(difflib.get_close_matches(name, listed, n=3, cutoff=0.6)) if name not in listed else ()
    return Listing(name, name in listed, variants, len(listed), nearest)
