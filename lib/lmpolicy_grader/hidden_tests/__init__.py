"""The hidden tests, one module per notebook (``nb01`` ... ``nb08``): what a test cell's hidden part calls.

They run in the trusted kernel after the exercise's visible checks, on inputs drawn from the hidden seed
(``lmpolicy.per_student.hidden_inputs``), and call the student's code through the exercise's declaration
(``lmpolicy.exercises``), so that the same shortcuts are blocked. This package is the grader's: it is in no
student's install and on no student's hub server, and nbgrader strips the lines that call it from the release.
"""
