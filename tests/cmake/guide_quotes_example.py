#!/usr/bin/env python3
"""Checks that a guide quotes its example: docs/plugin-author-guide.md
examples/accel-plugin/, docs/dra-driver-guide.md examples/accel-dra-driver/.

Usage: guide_quotes_example.py PROGRAM... GUIDE
       guide_quotes_example.py --extract OUT PROGRAM... GUIDE
The second form writes the guide's blocks quoted from the PROGRAMs, in the
guide's order, to OUT: one file that a test compiles alone, so that a reader
who copies the guide's code gets a program that builds.
Every block between "// guide:<name>" and "// guide:end" in a program must
appear, verbatim and in full, inside a ```cpp block of the guide, and the
guide must quote no C++ block that is not from the programs (apart from blocks
marked "<!-- not from the example -->" on the line before), so the guide
cannot drift from code that is built and run by the package test.
"""
import re
import sys


def blocks_of_program(text):
    blocks = {}
    for match in re.finditer(r"^// guide:(\w+)\n(.*?)^// guide:end\n", text,
                             re.S | re.M):
        name, body = match.group(1), match.group(2)
        if name == "end":
            continue
        blocks[name] = body
    return blocks


def cpp_blocks_of_guide(text):
    out = []
    for match in re.finditer(r"(^[^\n]*\n)?```cpp\n(.*?)^```", text,
                             re.S | re.M):
        before = match.group(1) or ""
        out.append((before.strip() == "<!-- not from the example -->",
                    match.group(2)))
    return out


def extract(out_path, program_paths, guide_path):
    guide = open(guide_path, encoding="utf-8").read()
    bodies = set()
    for program_path in program_paths:
        bodies.update(blocks_of_program(
            open(program_path, encoding="utf-8").read()).values())
    chosen = [code for exempt, code in cpp_blocks_of_guide(guide)
              if not exempt and code in bodies]
    if not chosen:
        print(f"{guide_path}: quotes no block of {' or '.join(program_paths)}")
        return 1
    with open(out_path, "w", encoding="utf-8") as out:
        out.write("// The C++ of " + guide_path.rsplit("/", 1)[-1] +
                  " quoted from " +
                  ", ".join(p.rsplit("/", 1)[-1] for p in program_paths) +
                  ", in its order.\n")
        for code in chosen:
            out.write(code + "\n")
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--extract":
        return extract(sys.argv[2], sys.argv[3:-1], sys.argv[-1])
    program_paths, guide_path = sys.argv[1:-1], sys.argv[-1]
    guide = open(guide_path, encoding="utf-8").read()
    quoted = cpp_blocks_of_guide(guide)
    errors = []
    bodies = set()
    for program_path in program_paths:
        program = open(program_path, encoding="utf-8").read()
        blocks = blocks_of_program(program)
        if not blocks:
            errors.append(f"{program_path}: no guide: blocks")
        for name, body in blocks.items():
            if not any(body == code for _, code in quoted):
                errors.append(f"{guide_path}: does not quote block '{name}' "
                              f"of {program_path} verbatim")
        bodies.update(blocks.values())
    if len(bodies) < 3:
        errors.append(f"expected guide: blocks, found {len(bodies)}")
    for exempt, code in quoted:
        if not exempt and code not in bodies:
            first = code.splitlines()[0] if code else ""
            errors.append(f"{guide_path}: C++ block starting {first!r} is "
                          f"not a guide: block of {' or '.join(program_paths)}")
    for error in errors:
        print(error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
