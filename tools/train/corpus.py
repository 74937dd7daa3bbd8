"""The training text: the King James Version of the Bible (public domain),
read from Debian's bible-kjv-text through its `bible` program (bible-kjv,
GPL-2+; the text itself is out of copyright), one chapter per document.

Chapters are split into train and held-out by a fixed rule (every
HELDOUT_EVERY-th chapter, counted from the first), so the split never depends
on a random seed and the held-out text reads like the training text without
repeating it."""
import re
import shutil
import subprocess

HELDOUT_EVERY = 25          # 1189 chapters -> 47 held out (~4 %)
FIRST_LAST = "Gen1:1-Rev22:21"
_HEADING = re.compile(r"^(?:[1-3] )?[A-Z][A-Za-z ]+ \d+$")   # "Genesis 1", "1 Kings 3", "Song of Solomon 2"
_VERSE = re.compile(r"^\s*\d+ (.*)$")


class CorpusError(Exception):
    pass


def bible_text():
    """The whole KJV as `bible` prints it, one verse per line (no wrapping)."""
    exe = shutil.which("bible")
    if exe is None:
        raise CorpusError("the `bible` program is missing: apt-get install bible-kjv bible-kjv-text")
    # -l with a huge width: one verse per line (the default wraps at 80 columns).
    out = subprocess.run([exe, "-l1000000", FIRST_LAST], capture_output=True, text=True, check=True).stdout
    return out


def chapters(text=None):
    """-> [(title, chapter text)]: verses joined by newlines, verse numbers dropped."""
    text = bible_text() if text is None else text
    out, title, verses = [], None, []
    for line in text.splitlines():
        if not line.strip():
            continue
        if _HEADING.match(line):
            if title is not None:
                out.append((title, "\n".join(verses)))
            title, verses = line.strip(), []
            continue
        m = _VERSE.match(line)
        if m is None or title is None:
            raise CorpusError("unexpected line in the KJV text: %r" % line[:80])
        verses.append(m.group(1).strip())
    if title is not None:
        out.append((title, "\n".join(verses)))
    if len(out) != 1189:
        raise CorpusError("expected 1189 chapters in the KJV, found %d" % len(out))
    return out


def split(chs):
    """-> (train chapters, held-out chapters), texts only."""
    train = [t for i, (_, t) in enumerate(chs) if i % HELDOUT_EVERY != HELDOUT_EVERY - 1]
    held = [t for i, (_, t) in enumerate(chs) if i % HELDOUT_EVERY == HELDOUT_EVERY - 1]
    return train, held


if __name__ == "__main__":
    chs = chapters()
    tr, he = split(chs)
    print("%d chapters: %d train (%d chars), %d held out (%d chars)"
          % (len(chs), len(tr), sum(map(len, tr)), len(he), sum(map(len, he))))
    print(chs[0][0], "|", chs[0][1][:200])
