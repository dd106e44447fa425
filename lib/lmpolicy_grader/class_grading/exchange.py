"""The course's exchange: nbgrader's collect, blind to a submission whose copy into the exchange never finished.

Stock nbgrader 0.9.6 `submit` copies the assignment straight into
inbound/<student>+<assignment>+<timestamp>+<random>/ and writes timestamp.txt there only once the copy is
done. Its `collect` takes each student's newest inbound folder by the timestamp in the folder's name,
finished or not, and with update=True (formgrader's Collect button) deletes the complete submission
already in submitted/ to copy the cut-off one over it. A student's server killed in the middle of a
submit (or a full disk) thus replaced their last good submission with a part of one.

This collect skips an inbound folder without timestamp.txt and collects that student's newest complete
one instead (none, if they have none): what they last handed in whole.
"""
import glob
import os

from nbgrader.exchange.default.collect import ExchangeCollect


def is_complete(folder: str) -> bool:
    """Whether submit finished copying into ``folder`` (it writes timestamp.txt last but one, after the files)."""
    return os.path.isfile(os.path.join(folder, "timestamp.txt"))


class ExchangeCollectComplete(ExchangeCollect):

    def init_src(self):
        super().init_src()
        chosen = []
        for record in self.src_records:
            if is_complete(os.path.join(self.inbound_path, record["filename"])):
                chosen.append(record)
                continue
            self.log.warning("Skipping %s: its copy into the exchange never finished", record["filename"])
            pattern = os.path.join(self.inbound_path, f"{record['username']}+{self.coursedir.assignment_id}+*")
            whole = [self._path_to_record(path) for path in glob.glob(pattern) if is_complete(path)]
            if whole:
                chosen.append(self._sort_by_timestamp(whole)[0])
        self.src_records = chosen
