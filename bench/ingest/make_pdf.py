"""Writes a text PDF with N pages (default 200) of varied English prose, using only the
standard library: the input of the ingestion benchmark."""

import random
import sys

WORDS = (
    "the service stores documents in collections and answers questions with citations "
    "retrieval augmented generation combines search with a language model so that answers "
    "stay grounded in the uploaded material each page of this report discusses a different "
    "topic such as revenue growth customer churn supply chains battery chemistry river "
    "ecology medieval trade routes protein folding compiler design and weather forecasting "
    "engineers measure latency throughput memory and cost before they ship a change"
).split()


def page_text(rng, n):
    lines = [f"Chapter {n}: notes on topic {n % 17}"]
    for _ in range(38):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(12)).capitalize() + ".")
    return lines


def escape(s):
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def main():
    pages = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    out = sys.argv[2] if len(sys.argv) > 2 else "bench.pdf"
    rng = random.Random(42)
    objects = []  # bodies, 1-based ids
    font_id = 3
    page_ids = []
    content = []
    for n in range(1, pages + 1):
        ops = ["BT", "/F1 10 Tf", "12 TL", "50 780 Td"]
        for line in page_text(rng, n):
            ops.append(f"({escape(line)}) Tj T*")
        ops.append("ET")
        content.append("\n".join(ops).encode())
    # 1 catalog, 2 pages, 3 font, then (page, content) pairs
    next_id = 4
    kids = []
    for _ in range(pages):
        kids.append((next_id, next_id + 1))
        next_id += 2
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(
        f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p, _ in kids)}] /Count {pages} >>".encode()
    )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for (page, cont), stream in zip(kids, content):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 {font_id} 0 R >> >> /Contents {cont} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    buf = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(buf))
        buf += f"{i} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(buf)
    buf += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        buf += f"{off:010d} 00000 n \n".encode()
    buf += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    with open(out, "wb") as f:
        f.write(buf)


if __name__ == "__main__":
    main()
