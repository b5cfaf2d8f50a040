{% filter upper | replace('A', 'b') %}{% for m in messages %}{{ m.content }}{% set x = 1 %}{% endfor %}{% endfilter %}{% filter indent(2, true, true) %}a

b{% endfilter %}