"""Budgets per paid rung and per client key, shared by every process on one Redis.

The same role as `LocalBudget`, for a cluster: every worker and replica that uses the same
`RedisLink` prefix holds against the same spend and the same open holds.

- A reserve is one round trip: a Lua script drops the accounts' expired holds, checks
  spent + held + amount against each budget, and adds the hold to both accounts or to
  neither (`budget_scripts.RESERVE`).
- Settles, releases and costs without a hold go to a background sender
  (`budget_writer.SpendWriter`), idempotent and replayed after an outage; while Redis does
  not answer they are also kept on disk, and a gateway stopped meanwhile sends them at its
  next start.
- A reserve whose reply never came (a timeout) may still have run in Redis: a release by
  its id is queued at once, and whichever of the two Redis runs first, nothing stays held.
- A Redis that restarted empty is seeded again from the ledger; each process then holds
  its open holds again, and their settles count in full (`budget_scripts` says how a
  settle tells a lost hold from one already counted).
- `rung_spend` and `key_spend` stay synchronous for the ladder and the reports: they read
  a local mirror, updated from each reserve's reply and refreshed every second. The
  script, not the mirror, decides whether a hold fits.
- While Redis does not answer, a hold against a budget is refused (`BudgetUnavailable`):
  a budgeted paid rung is never served unmetered. Nothing without a budget needs Redis.
- Every hold is also written to the local `ReservationLog` (the ledger's journal) before
  it is relied on, so a killed process still leaves its `unrecorded` rows; in Redis its
  holds expire for the whole cluster after `reservation_ttl_s`, and when it starts again
  the cost of those rows reaches the shared spend once.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
from collections.abc import Iterable, Mapping
from typing import Final

from redis.exceptions import ResponseError

from rungway.budget.local import (
    HeldFor,
    KeyBudget,
    Reservation,
    ReservationLog,
    Shortfall,
    SpentSince,
    UnrecordedCost,
)
from rungway.budget.unavailable import BudgetUnavailable
from rungway.clock import Clock
from rungway.cluster.budget_accounts import Account, Accounts
from rungway.cluster.budget_changes import PendingChanges
from rungway.cluster.budget_scripts import (
    GIVEN_BACK,
    MISSING,
    RESERVE,
    SHORT,
    TOTALS,
    nano,
    usd,
)
from rungway.cluster.budget_writer import (
    LedgerUnreadable,
    SpendWriter,
    Unrecorded,
    crash_marker,
    stopped,
)
from rungway.cluster.channel import ChannelScript
from rungway.cluster.link import UNREACHABLE, RedisLink
from rungway.routing.rungs import Rung
from rungway.routing.settings import LadderSettings
from rungway.routing.snapshot import RungSpend

log = logging.getLogger("rungway.cluster")

_TOKEN_GRACE_S: Final = 86_400
"""How long past its expiry a hold's token lives: a settle that late still counts once."""


class RedisBudget:
    """Budgets per paid rung and per client key, shared through Redis."""

    def __init__(
        self,
        settings: LadderSettings,
        link: RedisLink,
        spent_since: SpentSince,
        *,
        clock: Clock,
        keys: Iterable[KeyBudget] = (),
        log: ReservationLog | None = None,
        unrecorded: Unrecorded | None = None,
        pending: PendingChanges | None = None,
        refresh_s: float = 1.0,
    ) -> None:
        self._link = link
        self._clock = clock
        self._ttl = settings.reservation_ttl_s
        self._token_ttl = int(self._ttl) + _TOKEN_GRACE_S
        self._log = log
        self._unrecorded = unrecorded
        self._refresh_s = refresh_s
        self._accounts = Accounts(link, settings, keys)
        # The hold is the request path's one round trip: through the pipelined channel.
        self._reserve = ChannelScript(link.channel, RESERVE)
        self._totals = link.client.register_script(TOTALS)
        self._writer = SpendWriter(
            link, spent_since, unrecorded, clock, done_ttl_s=self._token_ttl, pending=pending
        )
        self._pending_path = pending.path if pending is not None else None
        self._writer.on_missing = self._rehold
        self._open: dict[int, Reservation] = {}
        self._held_in: dict[int, str] = {}
        """The seed each hold of this process was taken in, until it is settled."""
        self._seeds: dict[str, bytes] = {}
        """Per spend hash, the name of its seed as last read: a new one means Redis lost
        everything and someone seeded it again."""
        # Ids must not repeat across processes or restarts: the journal may hold the last's.
        self._ids = itertools.count(secrets.randbits(48) << 12)
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        link.on_join(self._joined)

    async def reserve(
        self,
        rung: Rung,
        client_key: str | None,
        amount: float,
        now: float,
        *,
        held_for: HeldFor | None = None,
    ) -> Reservation | Shortfall | BudgetUnavailable | None:
        """Hold `amount` against the rung's and the key's budgets in one round trip, or say
        which cannot; refused while Redis does not answer; None when neither has a budget."""
        account = self._accounts.rungs[rung]
        key = self._accounts.keys.get(client_key) if client_key is not None else None
        if account.budget is None and (key is None or key.budget is None):
            return None
        if not self._link.up:
            return self._unavailable(account, key)
        link = self._link
        accounts = (account,) if key is None else (account, key)
        targets = tuple(each.target_at(link, now) for each in accounts)
        reservation_id = next(self._ids)
        held = nano(amount)
        member = f"{reservation_id}:{held}"
        expires_at = now + self._ttl
        keys = [part for t in targets for part in (t.spent, t.holds, t.reserved)]
        keys.append(link.key("budget", "hold", str(reservation_id)))
        args: list[str | int] = [repr(now), repr(expires_at), held, member, self._token_ttl]
        args += ["" if each.budget is None else nano(each.budget) for each in accounts]
        for _ in range(3):
            try:
                reply = await self._reserve(keys, args)
                if reply[0] != MISSING:
                    break
                # First use, a new period, or a Redis that restarted empty: seed, then retry.
                await self._writer.seed([targets[int(reply[1]) - 1]])
            except ResponseError:
                log.exception("budget: redis refused the reserve script")
                return self._unavailable(account, key)
            except UNREACHABLE as error:
                link.lost(error)
                # The script may have run though its reply never came (a timeout): give the
                # hold back by its id. Whichever reaches Redis first, nothing stays held.
                self._writer.queue("release", keys[-1], member, targets, 0)
                return self._unavailable(account, key)
            except LedgerUnreadable as error:
                # Nothing to hold against: the spend is unknown (the writer said why, once).
                return self._unavailable(account, key, f"the ledger: {error.reason}")
        else:
            return self._unavailable(account, key)
        if reply[0] == GIVEN_BACK:  # ids never repeat: only a lost reply can lead here
            return self._unavailable(account, key)
        for index, each in enumerate(accounts):
            each.seen = (targets[index].start, usd(reply[2 + 2 * index]), usd(reply[3 + 2 * index]))
        if reply[0] == SHORT:
            index = int(reply[1]) - 1
            short = accounts[index]
            assert short.budget is not None
            return Shortfall(
                short.grouping, short.name, short.budget, short.period, targets[index].end
            )
        reservation = Reservation(
            reservation_id,
            rung,
            client_key,
            amount,
            expires_at,
            targets[0].start,
            targets[1].start if key is not None else float("nan"),
            held_for,
        )
        if self._log is not None:
            self._log.opened(reservation)
        self._open[reservation_id] = reservation
        self._held_in[reservation_id] = reply[-1].decode()
        return reservation

    def settle(self, reservation: Reservation, cost: float, now: float) -> None:
        """Replace the hold with the request's real cost, in its own period; sent in the
        background, counted once however often it is sent."""
        if not 0.0 <= cost < float("inf"):
            # Never a credit nor an unknown: the hold is the most the attempt could cost.
            log.error("budget: a settle of %r is no cost; settled at its hold", cost)
            cost = reservation.amount
        self._open.pop(reservation.id, None)
        seed = self._held_in.pop(reservation.id, "")
        targets = self._accounts.hold_targets(reservation)
        token, member = self._hold_keys(reservation)
        self._writer.queue("settle", token, member, targets, nano(cost), seed=seed)
        self._accounts.mirror(targets, cost, -reservation.amount)

    def release(self, reservation: Reservation) -> None:
        """Give the hold back: the attempt cost nothing."""
        if self._open.pop(reservation.id, None) is not None and self._log is not None:
            self._log.closed(reservation.id)
        seed = self._held_in.pop(reservation.id, "")
        targets = self._accounts.hold_targets(reservation)
        token, member = self._hold_keys(reservation)
        self._writer.queue("release", token, member, targets, 0, seed=seed)
        self._accounts.mirror(targets, 0.0, -reservation.amount)

    def spend(
        self,
        rung: Rung,
        client_key: str | None,
        cost: float,
        now: float,
        *,
        request_id: str | None = None,
    ) -> None:
        """Count a cost that had no hold; counted once per `request_id`."""
        if not 0.0 <= cost < float("inf"):
            log.error("budget: a cost of %r without a hold is no cost; not counted", cost)
            return
        targets = self._accounts.targets(rung, client_key, now)
        marker = self._link.key("budget", "done", request_id or secrets.token_hex(12))
        self._writer.queue("spend", marker, "", targets, nano(cost))
        self._accounts.mirror(targets, cost, 0.0)

    def rung_spend(self, now: float) -> Mapping[Rung, RungSpend]:
        """Spent and reserved per rung in the current period, as last mirrored."""
        spend = {}
        for rung, account in self._accounts.rungs.items():
            spent, held = account.figures(account.target_at(self._link, now).start)
            if spent or held:
                spend[rung] = RungSpend(spent, held)
        return spend

    def key_spend(self, client_key: str, now: float) -> RungSpend | None:
        """Spent and reserved by a budgeted key in its current period (None if unbudgeted)."""
        account = self._accounts.keys.get(client_key)
        if account is None:
            return None
        return RungSpend(*account.figures(account.target_at(self._link, now).start))

    @property
    def pending(self) -> int:
        """Changes not yet acknowledged by Redis."""
        return self._writer.pending

    async def start(self) -> None:
        """Queue what the last run left waiting for Redis and the cost of the crash rows
        this period holds, and start the sender and the mirror's refresher; call before
        the link starts, so its join seeds and sends."""
        left = self._writer.load()
        if left:
            log.warning("budget: %d changes the last run left for redis are sent", left)
        now = self._clock.now()
        if self._unrecorded is not None:
            since = min(each.target_at(self._link, now).start for each in self._accounts.every())
            for row in await asyncio.to_thread(self._unrecorded, since):
                self._recover(row)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._writer.run()),
            loop.create_task(self._refresh_forever()),
        ]

    async def flush(self) -> None:
        """Send every queued change now (raises when Redis does not answer)."""
        await self._writer.flush()

    async def close(self) -> None:
        """Stop the background tasks, sending what is queued if Redis answers."""
        self._writer.stop()
        self._stopping = True
        for task in self._tasks:
            await stopped(task)
        if self._link.up and self._writer.pending:
            try:
                await asyncio.wait_for(self._writer.flush(), timeout=2.0)
            except UNREACHABLE as error:  # asyncio's timeout among them
                log.warning("budget: redis did not take the last changes: %s", error)
        if self._writer.pending and self._pending_path is not None:
            log.warning(
                "budget: %d changes wait for redis at %s in %s; they are sent at the next start",
                self._writer.pending,
                self._link.address,
                self._pending_path,
            )
        elif self._writer.pending:
            log.warning(
                "budget: %d changes never reached redis at %s; the ledger holds their rows",
                self._writer.pending,
                self._link.address,
            )
        self._writer.close()

    async def refresh(self, now: float) -> None:
        """Read every account's spend and open holds into the mirror in one round trip,
        dropping expired holds; seed the spend hashes found missing."""
        accounts = self._accounts.every()
        targets = [each.target_at(self._link, now) for each in accounts]
        keys = [part for t in targets for part in (t.spent, t.holds, t.reserved)]
        reply = await self._totals(keys, [repr(now)])
        missing = []
        reseeded = False
        for index, (account, target) in enumerate(zip(accounts, targets, strict=True)):
            spent, held, seed = reply[3 * index : 3 * index + 3]
            if spent < 0:
                missing.append(target)
            elif self._seeds.setdefault(target.spent, seed) != seed:
                self._seeds[target.spent] = seed
                reseeded = True
            account.seen = (target.start, usd(max(0, spent)), usd(held))
        # This process's own holds that expired no longer need the journal's entry.
        for reservation in [each for each in self._open.values() if each.expires_at <= now]:
            del self._open[reservation.id]
            if self._log is not None:
                self._log.closed(reservation.id)
        if missing:
            await self._writer.seed(missing)  # which holds this process's open holds again
        elif reseeded:
            self._rehold()

    async def _joined(self) -> None:
        """(Re)joined Redis: seed this period's spend, replay what waited, read the mirror."""
        now = self._clock.now()
        accounts = self._accounts.every()
        try:
            await self._writer.seed(each.target_at(self._link, now) for each in accounts)
            # Whether Redis restarted empty or not: a hold it still has is left as it is.
            self._rehold()
            await self._writer.flush()
            await self.refresh(now)
        except UNREACHABLE:
            raise
        except LedgerUnreadable:
            pass  # it must not keep the link down: a reserve seeds later (the writer said why)
        except Exception:
            log.exception("budget: could not seed or replay on joining redis")

    async def _refresh_forever(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._refresh_s)
            if not self._link.up or self._stopping:
                continue
            try:
                await self.refresh(self._clock.now())
            except UNREACHABLE as error:
                self._link.lost(error)
            except LedgerUnreadable:
                pass  # the writer said why; the next refresh or reserve seeds again
            except Exception:
                log.exception("budget: refreshing the mirror from redis failed")

    def _rehold(self) -> None:
        """Queue this process's open holds to be held again where Redis lost them (it
        restarted empty): until they settle, they count against their budgets."""
        for reservation in self._open.values():
            token, member = self._hold_keys(reservation)
            targets = self._accounts.hold_targets(reservation)
            self._writer.queue("rehold", token, member, targets, 0, at=reservation.expires_at)

    def _recover(self, row: UnrecordedCost) -> None:
        """Queue a crash row's cost for the accounts whose current period holds it."""
        targets = self._accounts.crash_targets(row, self._clock.now())
        if targets and row.cost_usd > 0:
            marker = crash_marker(row.request_id)
            self._writer.queue("recover", targets[0].spent, marker, targets, nano(row.cost_usd))

    def _hold_keys(self, reservation: Reservation) -> tuple[str, str]:
        token = self._link.key("budget", "hold", str(reservation.id))
        return token, f"{reservation.id}:{nano(reservation.amount)}"

    def _unavailable(
        self, account: Account, key: Account | None, store: str | None = None
    ) -> BudgetUnavailable:
        budgeted = account if account.budget is not None or key is None else key
        where = store or f"redis at {self._link.address}"
        return BudgetUnavailable(budgeted.grouping, budgeted.name, where)
