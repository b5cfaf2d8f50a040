  {%- raw %} {{ not evaluated }} {% if %}{% endraw -%}
{% raw %}{%- endraw %}
