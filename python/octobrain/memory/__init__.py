"""The memory engine behind `Brain`: writes, reads (hybrid search over the in-process mirror
and its snapshot), curation (sleep consolidation, conflicts, goals), briefings, conversations
and transfer. Uses store/, embed/ and kernels/; used by cli/, server/ and bench/."""
