"""The chapter's graded exercises, one module per notebook (``nb01`` ... ``nb08``).

Each module declares its notebook's exercises once (``Exercise``: key, visible checks, shortcuts) and holds the
visible checks a check cell calls in one line. The hidden tests are the grader's
(``lmpolicy_grader.hidden_tests``, never in a student's install); points, title and mark scheme are the
notebook's cells; the per-student numbers are ``lmpolicy.per_student.variants``. ``registry`` finds them all.
"""
