"""The read-ahead policy of a file's walk (Walk): while the caller asks for
the keys in order (sorted, as keys() lists them, by offset, or in natural
order: layers.2 before layers.10), the reads of the next tensors are
already queued (a read-ahead window that doubles with every hit, up to
`readahead` bytes, and resets on a jump). Slices are read ahead too: the
next tensor of a family (the name with its numbers taken out: every
layer's q_proj) gets the indices the family's last one got, when its shape
is the same; a file's first cut that looks like one rank's part of a
tensor-parallel split predicts the next tensors' parts (a few times its
own bytes, until the next request confirms it). A caller that asks each
tensor for several indices in a row (every rank's slice of it) gets the
next tensors read ahead with all of them. Once the walk has queued the
last reads of its file, it asks for the next file (open_next).

A Walk knows its file only through what it is given: the tensors' infos,
their names' orders, `reads` (a PlanReads: reads ahead), `submit` (the
read of a request not read ahead) and `open_next` (room: the next shard
opened ahead with that many bytes). Its caller holds a lock around every
call, and settles the reads the walk drops outside it."""
from .ahead import ReadsAhead
from .plans import canonical, plan_tensor, same_index
from .slicing import SliceError
from .walk_memory import split_index

FIRST_WINDOW = 64 << 20
SKIP = 8  # keys a request may skip and still continue the walk
SCAN = 256  # keys a request looks at for reading ahead
_NO_PATTERN = (None, ())
# indices a family remembers of its last tensor: a tensor read row by row
# (32,000 indices) would otherwise cost every request a walk over all of them
_PATTERN_MAX = 64


class Walk:
    """The walk of one file's tensors (infos: name -> TensorInfo; names: their
    NameOrders; by_offset: the names in file order); memory is the
    process's WalkMemory, which this walk learns from and teaches."""

    def __init__(self, infos, names, by_offset, reads, submit, open_next, readahead, memory):
        self.infos, self._names, self._memory = infos, names, memory
        self.reads, self.submit, self.open_next = reads, submit, open_next
        self.readahead = readahead
        # the walk's orders: sorted, by offset, natural (None until needed)
        self._orders = [names.keys, by_offset, None]
        self._positions = [names.at_key, {k: i for i, k in enumerate(by_offset)}, None]
        self._order, self._pos = self._orders[0], self._positions[0]
        self.ahead = ReadsAhead()  # in the order predicted
        self.next = 0
        self.last = None  # the key asked last
        self.window = 0
        # name with its numbers taken out -> (shape, indices): the indices the
        # family's last tensor was asked for, in order (_follow), and the
        # tensor and how many of them it has had
        self._families, self._cursor = {}, {}
        # whether memory.families (the last walk of another file) may predict
        # this file's families
        self._hint_ok = True
        self._whole_walk = False  # the last request was for a whole tensor
        # one rank's part of a dimension (split_of) that two requests in a
        # row cut alike from tensors of different lengths there: it predicts
        # families not seen yet (another file's walk's, until this one's
        # says otherwise); and the last such request's split and length
        self._split = memory.last_split
        self._split_last = None
        # while _split is only the file's first cut, until the next request:
        # the bytes it may read ahead (None once confirmed or given up)
        self._guess_room = None
        self._scanned = 0  # keys before this position were looked at with what is known now
        self.next_file_tried = False  # whether open_next was called
        self._reserved_split = None  # the split whose parts of the file were reserved

    # -- what the caller asks ---------------------------------------------------
    def request(self, info, index, plan, dropped):
        """The read of info's plan (index as asked, None for all of it): read
        ahead already, or submitted now; then the window is filled.
        Reads given up go to dropped."""
        family = self._memory.family(info.name)
        if family not in self._families and self._hint_ok:
            hint = self._memory.families.get(family)
            hint = hint and self._split_over(hint, info)
            if hint is not None and hint[0] == info.shape and \
                    not same_index(hint[1][0], index):
                self._drop_hinted(dropped)  # another rank, another walk: none of it holds
        guessed = self._guess_room is not None  # the file's first cut, not confirmed
        kept = index if index is None else canonical(index)
        if index is None or kept is not None:  # an index predictions can keep
            self._learn(info, family, kept, plan)
        if guessed and self._guess_room is not None:  # the next request did not confirm it
            self._split = self._guess_room = None
        read = self._take(info.name, plan, dropped)
        self.fill(dropped)
        return read

    def retarget(self, reads, dropped):
        """The walk's reads ahead go through reads (another device's) from
        now on; what was read ahead goes to dropped."""
        self.reads = reads
        self.drop_ahead(dropped)

    def drop_ahead(self, dropped):
        """Everything read ahead goes to dropped; the window starts over."""
        self.ahead.drop_all(dropped)
        self.window, self._scanned = 0, 0

    def order_kind(self):
        """Which of the walk's orders it follows (0 sorted, 1 by offset, 2
        natural)."""
        return next(j for j, order in enumerate(self._orders) if order is self._order)

    def start_as(self, kind, window):
        """A walk of a file opened ahead: it follows order kind with a
        window of window bytes, and opens no file after it until its
        caller's requests say (no chain of files nobody opened)."""
        self._order, self._pos = self._order_of(kind)
        self.window = window
        self.next_file_tried = True

    # -- learning from a request ------------------------------------------------
    def _learn(self, info, family, kept, plan):
        """What a request with index kept (canonical, None: all of it)
        teaches: the family's pattern, whether whole tensors are walked,
        the split; the keys are looked at again when that changes what is
        predictable."""
        seen = self._follow(family, info.name, info.shape, kept)
        if self._families.get(family) == seen and self._whole_walk == (kept is None):
            return
        before = (self._expected(info, family)[0], self._split, self._whole_walk)
        self._families[family] = seen
        self._whole_walk = kept is None
        self._note_split(info.shape, kept, plan.nbytes)
        if before != (seen, self._split, self._whole_walk):
            # what was not predictable before may be now; a family asked as
            # predicted leaves the keys looked at as they are
            self._scanned = 0
        self._memory.remember(family, seen)

    def _follow(self, family, name, shape, index):
        """The family's (shape, indices) once name is asked with index: the
        indices its last tensor was asked for, in order. A tensor asked
        again with a new index adds it (a process that holds every rank
        asks each tensor for every rank's slice); the next tensor of the
        family keeps those its last one was asked for while it is asked as
        that one was."""
        last_shape, pattern = self._families.get(family, _NO_PATTERN)
        at, pos = self._cursor.get(family, (None, 0))
        if last_shape != shape or not pattern:
            # as another file's walk asked the family, while this one agrees
            hint = self._memory.families.get(family, _NO_PATTERN) if self._hint_ok \
                else _NO_PATTERN
            pattern = hint[1] if hint[0] == shape and hint[1][:1] == (index,) else (index,)
            pos = 1
        elif at != name:
            pattern = pattern[:pos]  # what the last tensor was not asked for is not a pattern
            pattern, pos = (pattern, 1) if pattern[0] == index else ((index,), 1)
        elif index in pattern[:pos]:
            pass  # asked again
        elif pos < len(pattern) and pattern[pos] == index:
            pos += 1
        elif pos < _PATTERN_MAX:
            pattern, pos = pattern[:pos] + (index,), pos + 1
        self._cursor[family] = (name, pos)
        return shape, pattern

    def _still_wanted(self, name):
        """The plans the family's indices still promise name, the tensor of
        the family asked last (those after the ones it was asked for); none
        once another tensor of the family was asked (a thread behind asking
        an earlier one included)."""
        family = self._memory.family(name)
        shape, pattern = self._families.get(family, _NO_PATTERN)
        at, pos = self._cursor.get(family, (None, 0))
        info = self.infos[name]
        if at != name or shape != info.shape:
            return []
        return [plan_tensor(info, index) for index in pattern[pos:]]

    def _note_split(self, shape, index, nbytes):
        """Whether index confirms a tensor-parallel cut of every family
        (_split). One rank's part alone does not: a fixed range of rows
        looks like one; the same rank of the same number of ranks from a
        tensor of another length does. The file's first cut is a guess
        until the next request, read ahead within the window for up to four
        times its own bytes (nbytes): without it a rank's walk waited alone
        for its first tensor while the engine idled
        (bench/results/2026-12-04-h200-engine-trace.md), and a wrong guess
        costs at most four times the cut read."""
        split = self._memory.split_of(shape, index) if index is not None else None
        if split is None:
            return
        length = shape[split[1]]
        last, self._split_last = self._split_last, (split, length)
        if self._split != split:
            if last is None:  # the file's first cut
                self._split, self._guess_room = split, 4 * nbytes
            else:  # the cut changed: no more guessing until confirmed again
                self._split = self._guess_room = None
        if last is not None and last[0] == split and last[1] != length:
            self._split = self._memory.last_split = split
            self._guess_room = None

    def _drop_hinted(self, dropped):
        """The last walk of another file stops predicting this one; what was
        read ahead on its word goes to dropped."""
        self._hint_ok = False
        self._scanned = 0  # families not seen yet are predicted otherwise now
        self.ahead.drop_hinted(dropped)

    # -- following the caller ---------------------------------------------------
    def _in_step(self, name):
        """Whether asking for name continues the walk. The walk keeps its
        order (sorted, by offset or natural) while name comes a few places
        after the key asked before it (the caller skips keys it does not
        need, norms when it shards), else follows the order in which name
        comes soonest after it; a key a few places from the next one (a pool
        of threads asks a little out of order) or one read ahead is in step
        too."""
        if self.last is not None:
            if 0 < self._pos[name] - self._pos[self.last] < SKIP:
                return True
            best = None
            for kind in range(len(self._orders)):
                order, pos = self._order_of(kind)
                d = pos[name] - pos[self.last]
                if 0 < d < SKIP and (best is None or d < best[0]):
                    best = (d, order, pos)
            if best is not None:
                self._switch(best[1], best[2])
                return True
        return name in self.ahead or abs(self._pos[name] - self.next) < SKIP

    def _order_of(self, kind):
        """Order kind of the walk's orders and its positions, the natural
        one worked out when first asked for."""
        if self._orders[kind] is None:
            self._orders[kind], self._positions[kind] = self._names.natural()
        return self._orders[kind], self._positions[kind]

    def _switch(self, order, pos):
        """The walk follows order from the key asked last on; what was read
        ahead stays for the keys it holds."""
        if order is not self._order:
            self._order, self._pos = order, pos
            self.next, self._scanned = pos[self.last] + 1, 0

    def _take(self, name, plan, dropped):
        """The read of name with plan. A request in step (_in_step) is a hit:
        the window grows; a key the walk has passed is served on its own; any
        other request drops what was read ahead and starts again from
        there."""
        straggler = name in self.ahead and self._pos[name] < self.next
        if straggler:  # read ahead for a thread left behind: the walk goes on
            pass
        elif self._in_step(name):  # (which may switch the order)
            self.window = min(max(2 * self.window, FIRST_WINDOW), self.readahead)
        elif self._pos[name] < self.next:  # a thread left behind: the walk goes on
            straggler = True
        else:
            self.drop_ahead(dropped)
            self.next = self._pos[name]
        i = self._pos[name]
        read = self.ahead.take(name, plan, self._still_wanted, dropped)
        if read is None:
            read = self.submit(self.infos[name], plan)
        if not straggler:
            self.next = max(self.next, i + 1)
            self.last = name
        return read

    # -- predicting and reading ahead ---------------------------------------------
    def _expected(self, info, family):
        """The (shape, indices) the next requests for info's tensor will most
        likely have, or None when unknown, and whether it is a guess not
        confirmed by this file's walk: the family's last indices; for a
        family not seen yet, the whole tensor while the caller reads whole
        tensors, else the indices the family got in another file until this
        file's walk contradicts that, else the cut of the last split."""
        seen = self._families.get(family)
        if seen is not None:
            return seen, False
        if self._whole_walk:
            return (info.shape, (None,)), False
        if self._hint_ok:  # as another shard of the checkpoint was walked
            seen = self._memory.families.get(family)
            if seen is not None:
                return self._split_over(seen, info), True
        if self._split is not None:
            # tensor-parallel ranks cut every layer alike; a wrong guess is
            # dropped when the tensor is asked for (_take)
            index = split_index(info.shape, self._split)
            if index:
                return (info.shape, (index,)), True
        return None, True

    def _split_over(self, seen, info):
        """Another walk's (shape, indices) of a family, or, when that walk
        took one rank's part where the cut confirmed last (_split) takes
        another rank's of the same split, this rank's part: the family was
        last asked before the ranks moved on."""
        if self._split is None or len(seen[1]) != 1 or seen[1][0] is None:
            return seen
        cut = self._memory.split_of(seen[0], seen[1][0])
        if cut is None or cut[:3] != self._split[:3] or cut == self._split:
            return seen
        index = split_index(info.shape, self._split)
        return (info.shape, (index,)) if index else seen

    def predict(self, name):
        """The plans the next requests for name will most likely have
        (_expected), none when unknown, and whether they are a guess."""
        info = self.infos[name]
        seen, hinted = self._expected(info, self._memory.family(name))
        if seen is None or seen[0] != info.shape:
            return [], False
        plans = []
        for index in seen[1]:
            try:
                plan = plan_tensor(info, index)
            except SliceError:
                return [], False
            if plan is not None and plan not in plans:
                plans.append(plan)
        return plans, hinted

    def _evict_passed(self, dropped):
        """Reads ahead of keys the walk has passed (skipped, or left for a
        thread behind; not the key asked last, which may be asked again
        with its other indices) go to dropped, to make room in the window;
        kept until the room is needed."""
        for name in [k for k in self.ahead if self._pos[k] < self.next and k != self.last]:
            self.ahead.drop(name, dropped)

    def fill(self, dropped):
        """Reads ahead, from the next key on, up to the window, the keys
        whose request can be predicted (at most SCAN keys ahead of the next;
        keys looked at already with what is known now are not looked at
        again), first making room from reads of keys the walk has passed
        when the window is full. A read that cannot be submitted (its shard
        unreadable, memory short) ends the filling quietly: the error is the
        request's that needs those bytes. Once the file's last reads are
        queued, a quarter or more into it, the next file is asked for."""
        if self.last is not None and self.window:  # the key asked last: its other indices
            wanted = self._still_wanted(self.last)
            if wanted:
                plans = self.ahead.not_ahead(self.last, wanted)
                if not self.ahead.read_batch(self.reads, [(self.last, self.infos[self.last],
                                                           plans, False)]):
                    self.window = 0
        i = max(self.next, self._scanned)
        stop = min(len(self._order), self.next + SCAN)
        if i - self.next > SCAN // 2:  # far enough ahead: small tensors go in groups
            stop = i
        if i < stop and self.ahead.nbytes >= self.window:
            self._evict_passed(dropped)
        i = self._read_from(i, stop)
        self._scanned = i
        # past a quarter of the file: its walk has shown how the families
        # are asked by now (a layer's worth), and the next file's reads are
        # predicted so; at the middle the engine ran dry while the caller
        # opened it (bench/results/2026-12-04-h200-engine-trace.md)
        if i == len(self._order) and self.ahead.nbytes < self.window and \
                not self.next_file_tried and 4 * self.next >= len(self._order):
            self.next_file_tried = True
            self.open_next(self.window - self.ahead.nbytes)

    def _read_from(self, i, stop):
        """Reads ahead of the keys from position i on (before stop) that
        the window has room for; returns the position after the last one
        read ahead whole. The window takes one tensor more than it
        has room for (a tensor larger than the window is read all the
        same); a guess does not."""
        room = self.window - self.ahead.nbytes
        guess = None if self._guess_room is None else self._guess_room - self.ahead.nbytes
        batch, first = [], i
        while i < stop and room > 0:
            name = self._order[i]
            plans, hinted = self.predict(name)  # each plan once
            if name in self.ahead:
                plans = self.ahead.not_ahead(name, plans)
            need = sum(plan.nbytes for plan in plans)
            if guess is not None:
                if need > guess:
                    break
                guess -= need
            batch.append((name, self.infos[name], plans, hinted))
            room -= need
            i += 1
        if not batch:
            return i
        sizes = None
        if self._split is None or self._split != self._reserved_split:
            sizes = [plan.nbytes for _, _, plans, _ in batch for plan in plans] + \
                self._rest_of_split(i)
        whole = self.ahead.read_batch(self.reads, batch, sizes)
        if whole < len(batch):
            self.window = 0
            i = first + whole
        return i

    def _rest_of_split(self, i):
        """When the file's split is confirmed, the split's parts of the keys
        from position i on, announced with the batch before them, once: the
        later batches of the file come out of that block, where a block a
        batch left a first rank asking the driver for several
        (bench/results/2026-12-04-h200-split-reserve.md)."""
        if self._split is None or self._guess_room is not None:
            return []
        self._reserved_split = self._split
        parts = []
        for name in self._order[i:]:
            info = self.infos[name]
            index = split_index(info.shape, self._split)
            if index is not None:
                parts.append(plan_tensor(info, index).nbytes)
        return parts
