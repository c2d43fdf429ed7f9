"""The reads a Walk has made ahead of the caller's requests (ReadsAhead):
by tensor name, in the order predicted, with their bytes, and how a batch
of them is submitted."""
from ._lib import GdunlockError
from .plans import GROUP_READS


class ReadsAhead:
    """name -> [Read] made ahead for it, the bytes they hold (nbytes), and
    the names read ahead on the word of another file's walk (hinted).
    Reads given up go to a list `dropped`, for the caller to settle outside
    its lock."""

    def __init__(self):
        self.by_name, self.nbytes, self.hinted = {}, 0, set()

    def __contains__(self, name):
        return name in self.by_name

    def __iter__(self):
        return iter(self.by_name)

    def __len__(self):
        return len(self.by_name)

    def add(self, name, read, hinted):
        self.by_name.setdefault(name, []).append(read)
        self.nbytes += read.plan.nbytes
        if hinted:
            self.hinted.add(name)

    def drop(self, name, dropped):
        """The reads ahead of name, if any, go to dropped."""
        for read in self.by_name.pop(name, ()):
            dropped.append(read)
            self.nbytes -= read.plan.nbytes

    def drop_all(self, dropped):
        dropped += [r for reads in self.by_name.values() for r in reads]
        self.by_name, self.nbytes = {}, 0

    def drop_hinted(self, dropped):
        """What was read ahead on another file's walk's word goes to
        dropped."""
        for name in self.hinted:
            self.drop(name, dropped)
        self.hinted.clear()

    def take(self, name, plan, still_wanted, dropped):
        """The read of name with plan, if one was made ahead (None if not);
        name's other reads ahead that still_wanted(name) (plans) no longer
        lists go to dropped."""
        read = None
        reads = self.by_name.get(name, [])
        for j, r in enumerate(reads):
            if r.plan == plan:
                read = reads.pop(j)
                self.nbytes -= plan.nbytes
                break
        if reads:
            wanted = still_wanted(name)
            for r in [r for r in reads if r.plan not in wanted]:  # read ahead with another index
                reads.remove(r)
                dropped.append(r)
                self.nbytes -= r.plan.nbytes
        if not reads:
            self.by_name.pop(name, None)
        self.hinted.discard(name)
        return read

    def not_ahead(self, name, plans):
        """Those of plans not read ahead for name yet, each once."""
        reads, new = self.by_name.get(name, ()), []
        for plan in plans:
            if plan is not None and plan not in new and not any(r.plan == plan for r in reads):
                new.append(plan)
        return new

    def read_batch(self, reads, batch, sizes=None):
        """Reads ahead through reads (a PlanReads) of each (name, info,
        plans, hinted) of batch, every one queued before any is given
        memory, so that the engine reads while memory is allocated; sizes,
        when given, are announced to the allocator in between
        (reads.reserve), the block it takes then allocated with the batch's
        reads under way. Returns how many of batch's names were read ahead
        whole: a read that cannot be queued or given memory ends the batch
        there, and the reads queued after it are cancelled."""
        queued, placed = [], 0
        try:
            whole = self._queue_batch(reads, batch, queued)
            if sizes is not None:
                reads.reserve(sizes)
            for k, name, info, plan, hinted, pending in queued:
                placed += 1  # given its memory, or cancelled by place when it raises
                try:
                    read = reads.place(pending, info, plan)
                except GdunlockError:
                    whole = min(whole, k)
                    break
                self.add(name, read, hinted)
        finally:
            for *_, pending in queued[placed:]:  # left without memory: nothing holds them
                reads.cancel(pending)
        return whole

    def _queue_batch(self, reads, batch, queued):
        """The first step of read_batch: each read of batch queued (added to
        queued, memory to come), small whole tensors of one file read in
        one request each group; returns how many of batch's names were
        queued whole."""
        whole, group = len(batch), []
        for k, (name, info, plans, hinted) in enumerate(batch):
            try:
                if len(plans) == 1 and reads.groupable(info, plans[0]):
                    if group and (group[0][2].file != info.file or len(group) == GROUP_READS):
                        self._read_group(reads, group)
                        group = []
                    group.append((k, name, info, plans[0], hinted))
                    continue
                for plan in plans:
                    queued.append((k, name, info, plan, hinted, reads.queue(info, plan)))
            except GdunlockError:
                whole = group[0][0] if group else k
                group = []
                break
        if group:
            try:
                self._read_group(reads, group)
            except GdunlockError:
                whole = group[0][0]
        return whole

    def _read_group(self, reads, group):
        """group [(position in the batch, name, info, plan, hinted)], small
        whole tensors of one file, read in one request."""
        got = reads.group([(info, plan) for _, _, info, plan, _ in group])
        for (_, name, _, _, hinted), read in zip(group, got):
            self.add(name, read, hinted)
