"""Where a GPU kernel's time loop reads and writes memory, read from its PTX (:func:`kernels.gpu.ptx_of`).

Numba's kernels take every array as its fields, each a PTX parameter (:class:`kernels.gpu.KernelPtx` names
them).  An access's address is followed back, through the definitions of its registers that reach it (PTX
reuses a register's name: only the definitions on a path to the use count) and the instructions that make a
pointer from a pointer (a copy, a sum, a choice, an address-space conversion), to the ``data`` fields it came
from, and so to the kernel argument it reads or writes.  The time loop is the kernel's largest natural loop (by
its instructions), which holds every step's stages."""

import bisect
import collections
import functools
import re

LABEL = re.compile(r"^(\$L__BB\d+_\d+):$")
BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__BB\d+_\d+);")
REGISTER = re.compile(r"%\w+")
PARAMETER = re.compile(r"_param_(\d+)\b")
PREDICATE = re.compile(r"^@!?%\w+\s+")
#: the operands a pointer may come from, per opcode (a pointer plus an offset, a copy, a choice); any other
#: instruction (a multiply, a shift, a compare, a load from memory but a parameter's) makes an offset or data
POINTER_OPERANDS = {"mov": (0,), "add": (0, 1), "sub": (0,), "cvta": (0,), "mad": (2,), "selp": (0, 1)}


def entry_lines(ptx: str) -> list[str]:
    """The instructions and labels of the PTX's one kernel (``.entry``), one per line."""
    body = ptx[ptx.index("{", ptx.index(".entry ")):]
    return [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("//")]


class KernelFlow:
    """The kernel's basic blocks, their edges, and per instruction the registers it defines and the registers and
    parameters a pointer it defines may come from."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        starts = sorted({0} | {i for i, line in enumerate(lines) if LABEL.match(line)}
                        | {i + 1 for i, line in enumerate(lines) if BRANCH.search(line) or line.startswith("ret")})
        self.starts = [start for start in starts if start < len(lines)]
        self.ends = self.starts[1:] + [len(lines)]
        block_of_label = {lines[start][:-1]: b for b, start in enumerate(self.starts) if LABEL.match(lines[start])}
        self.successors = []
        for end in self.ends:
            branch = BRANCH.search(lines[end - 1])
            targets = [block_of_label[branch.group(1)]] if branch else []
            if not lines[end - 1].startswith(("ret", "bra")) and len(self.successors) + 1 < len(self.starts):
                targets.append(len(self.successors) + 1)  # falls through (after a conditional branch too)
            self.successors.append(targets)
        self.predecessors = collections.defaultdict(set)
        for b, targets in enumerate(self.successors):
            for target in targets:
                self.predecessors[target].add(b)
        self.sources = {}  # line -> the pointer sources of what it defines
        self.definitions = [collections.defaultdict(list) for _ in self.starts]  # per block: register -> lines
        for b, (start, end) in enumerate(zip(self.starts, self.ends)):
            for i in range(start, end):
                opcode, operands = (PREDICATE.sub("", lines[i]).rstrip(";").split(None, 1) + [""])[:2]
                if opcode.startswith(("st.", "bra", "ret", "call")) or not operands.startswith(("%", "{")):
                    continue
                if operands.startswith("{"):  # a vector load's registers
                    destinations, _, rest = operands[1:].partition("}")
                    sources = rest.split(",")[1:]
                else:
                    destinations, *sources = operands.split(",")
                found = set(f"param {index}" for index in PARAMETER.findall(operands)) \
                    if opcode.startswith("ld.param") else set()
                for position in POINTER_OPERANDS.get(opcode.split(".")[0], ()):
                    if position < len(sources):
                        found.update(REGISTER.findall(sources[position]))
                        found.update(f"param {index}" for index in PARAMETER.findall(sources[position]))
                self.sources[i] = found
                for register in REGISTER.findall(destinations):
                    self.definitions[b][register].append(i)
        self.block_of_line = [b for b, (start, end) in enumerate(zip(self.starts, self.ends))
                              for _ in range(start, end)]

    def reaching(self, register: str, line: int) -> set:
        """The definitions of ``register`` that reach ``line``."""
        b = self.block_of_line[line]
        before = self.definitions[b].get(register, [])
        k = bisect.bisect_left(before, line)
        return {before[k - 1]} if k else self._reaching_entry(register, b)

    @functools.cache  # noqa: B019 (one flow per kernel, kept as long as its test)
    def _reaching_entry(self, register: str, block: int) -> frozenset:
        found, seen, todo = set(), set(), list(self.predecessors[block])
        while todo:
            b = todo.pop()
            if b in seen:
                continue
            seen.add(b)
            if register in self.definitions[b]:
                found.add(self.definitions[b][register][-1])
            else:
                todo.extend(self.predecessors[b])
        return frozenset(found)

    def pointer_parameters(self, register: str, line: int) -> set:
        """The parameters a pointer in ``register`` at ``line`` may come from."""
        found, seen, todo = set(), set(), [(register, line)]
        while todo:
            register, line = todo.pop()
            for definition in self.reaching(register, line):
                if definition in seen:
                    continue
                seen.add(definition)
                for source in self.sources[definition]:
                    if source.startswith("param "):
                        found.add(int(source.split()[1]))
                    else:
                        todo.append((source, definition))
        return found

    def largest_loop(self) -> list[int]:
        """The line numbers of the largest natural loop (its header, and every block from which a branch back to
        the header, a block dominating it, is reached without passing through the header), in order."""
        dominator = self._immediate_dominators()

        def dominates(a, b):
            while b != a and dominator[b] != b:
                b = dominator[b]
            return a == b
        loops = collections.defaultdict(set)
        for source, targets in enumerate(self.successors):
            for header in (target for target in targets if source in dominator and dominates(target, source)):
                body, todo = loops[header], [source]
                body.add(header)
                while todo:
                    block = todo.pop()
                    if block not in body:
                        body.add(block)
                        todo.extend(self.predecessors[block])
        body = max(loops.values(), key=lambda blocks: sum(self.ends[b] - self.starts[b] for b in blocks))
        return [i for b in sorted(body) for i in range(self.starts[b], self.ends[b])]

    def _immediate_dominators(self) -> dict:
        """Each reachable block's immediate dominator (the entry block 0 its own), by Cooper, Harvey and Kennedy's
        iteration over the reverse postorder."""
        order, seen, stack = [], {0}, [(0, iter(self.successors[0]))]
        while stack:
            block, following = stack[-1]
            for successor in following:
                if successor not in seen:
                    seen.add(successor)
                    stack.append((successor, iter(self.successors[successor])))
                    break
            else:
                order.append(block)
                stack.pop()
        order.reverse()
        rank = {block: i for i, block in enumerate(order)}
        dominator, changed = {0: 0}, True
        while changed:
            changed = False
            for block in order[1:]:
                known = [p for p in self.predecessors[block] if p in dominator]
                new = known[0]
                for other in known[1:]:
                    a, b = new, other
                    while a != b:
                        while rank[a] > rank[b]:
                            a = dominator[a]
                        while rank[b] > rank[a]:
                            b = dominator[b]
                    new = a
                if dominator.get(block) != new:
                    dominator[block], changed = new, True
        return dominator


def time_loop_accesses(kernel) -> collections.Counter:
    """How many loads and stores (``("ld" | "st", argument)``) the kernel's time loop makes of each kernel
    argument's data, counted in the PTX (a load or store once per instruction, not per execution); accesses of the
    thread's own local memory, of the parameters themselves and of arrays without elements (never executed) are not
    counted."""
    flow = KernelFlow(entry_lines(kernel.ptx))
    counts = collections.Counter()
    for i in flow.largest_loop():
        instruction = PREDICATE.sub("", flow.lines[i])
        address = re.search(r"\[(%\w+)", instruction)
        if not address or instruction[:3] not in ("ld.", "st.") or instruction.startswith(
                ("ld.param", "st.param", "ld.local", "st.local")):
            continue
        arguments = {kernel.parameters[index].removesuffix(".data") for index in
                     flow.pointer_parameters(address.group(1), i) if kernel.parameters[index].endswith(".data")}
        for argument in arguments - kernel.empty:
            counts[instruction[:2], argument] += 1
    return counts
